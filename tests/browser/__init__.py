"""Helpers for the report tests: a hand-made data directory and a headless chromium driver."""
