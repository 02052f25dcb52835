# Two user-facing targets (README): `make run` and `make test`. Everything else is a helper.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup browser run test lint bench-ingest bench-derive bench-analyze clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (or make PYTHON=python3)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)

## Debian's chromium for the report's browser tests (those tests skip, saying why, without it)
browser:
	@[ -x /usr/bin/chromium ] || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "note: chromium not installed; browser tests will be skipped"

## sets everything up, then runs the whole pipeline on the built-in default sample
run: $(STAMP)
	$(BIN)/tracelab run

## the whole test suite (CI calls exactly this)
test: $(STAMP) browser
	$(BIN)/ruff check flows analysis reports tests bench
	$(BIN)/mypy
	@# pytest exit 5 = no tests collected: not a failure of the code under test
	$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check flows analysis reports tests bench
	$(BIN)/ruff format --check flows analysis reports tests bench
	$(BIN)/mypy

bench-ingest: $(STAMP)
	$(BIN)/python bench/ingest.py

bench-derive: $(STAMP)
	$(BIN)/python bench/derive.py

bench-analyze: $(STAMP)
	$(BIN)/python bench/analyze.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
