"""Plain, typed, pure functions: parsing, synthetic traces, statistics. No Prefect here."""
