"""Prefect flows (thin orchestration) and the `tracelab` command line."""
