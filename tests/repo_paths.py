"""Where the repository is, for tests that read its files (docs, SQL cases, the wheel)."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
