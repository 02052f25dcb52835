# Two user-facing targets (README): `make run` and `make test`. Everything else is a helper.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LINKED := $(VENV)/.linked
FILE_LIST := build/package-files.txt
LOCK := requirements.lock
CODE := flows analysis reports queries tests bench

.PHONY: FORCE setup browser run test test-heavy test-cluster lint typecheck lock bench-ingest bench-ingest_jsonl bench-derive bench-statistics_stage \
	bench-packing bench-admission bench-placement bench-yield bench-fulltrace bench-check mutation-tree mutation mutation-sample clean

# Installs the exact versions in requirements.lock (libraries and ruff/mypy/pytest alike), then
# tracelab itself, editable, without re-resolving its dependencies.
$(STAMP): pyproject.toml $(LOCK)
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (or make PYTHON=python3)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r $(LOCK)
	@touch $(STAMP)
	@rm -f $(LINKED)

# Strict editable install: setuptools links every package file under build/__editable__.*/tracelab/
# (the installed names), so imports, mypy and an editor's go-to-definition follow plain files.
# A file added or removed changes the listing, which relinks.
$(LINKED): $(STAMP) $(FILE_LIST)
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e . --config-settings editable_mode=strict
	@touch $(LINKED)

$(FILE_LIST): FORCE
	@mkdir -p build
	@find analysis flows reports queries -type f ! -path '*/__pycache__/*' | sort > $(FILE_LIST).new
	@cmp -s $(FILE_LIST).new $(FILE_LIST) && rm $(FILE_LIST).new || mv $(FILE_LIST).new $(FILE_LIST)

setup: $(LINKED)

## re-resolve pyproject's ranges in a scratch venv and rewrite requirements.lock
lock:
	rm -rf build/lock-venv && $(PYTHON) -m venv build/lock-venv
	build/lock-venv/bin/pip install --quiet --upgrade pip
	build/lock-venv/bin/pip install --quiet '.[dev]'
	{ echo "# pip freeze of pyproject's [dev] install: make lock rewrites it"; \
	  build/lock-venv/bin/pip freeze --all --exclude tracelab --exclude pip; } > $(LOCK)

## Debian's chromium for the report's browser tests (those tests skip, saying why, without it)
browser:
	@[ -x /usr/bin/chromium ] || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "note: chromium not installed; browser tests will be skipped"

## sets everything up, then runs the whole pipeline on the built-in default sample
run: $(LINKED)
	$(BIN)/tracelab run

typecheck: $(LINKED)
	MYPYPATH="$$(echo build/__editable__.tracelab-*)" $(BIN)/mypy

lint: $(LINKED)
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)

## the whole test suite (CI calls exactly this); no test collected is a failure
test: $(LINKED) browser lint typecheck
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## the checks over the large shared real excerpts (minutes each; not in make test)
test-heavy: $(LINKED)
	$(BIN)/python -m pytest -m heavy

## the distributed run against a real Dask scheduler + 2 worker processes (slow; not in make test)
test-cluster: $(LINKED)
	$(BIN)/python -m pytest -m cluster tests/flows/test_dask_cluster.py

bench-ingest bench-ingest_jsonl bench-derive bench-statistics_stage bench-packing bench-admission bench-placement bench-yield bench-fulltrace: $(LINKED)
	$(BIN)/python bench/$(@:bench-%=%).py

## rows of docs/benchmarks.md measured before the last change to the code their bench measures
bench-check: $(LINKED)
	$(BIN)/python bench/check.py

## mutation testing of the consuming stages' stage-level modules (slow, not in CI).
## mutmut names modules by file path, so it runs in build/mutation/: a copy of the tree with the
## code under tracelab/ (the installed names); [tool.mutmut] in pyproject.toml says what it mutates.
## MUTANTS='tracelab.analysis.packing.stage.x_item_moments*' restricts the run to matching mutants;
## MUTANTS="$$(cat docs/mutation-sample.txt)" is the recorded sample (docs/development.md).
## build/mutation/mutants/ (mutmut's verdicts) is kept: a second run checks only new mutants.
MUTATION_DIR := build/mutation
mutation-tree: $(LINKED)
	rm -rf $(MUTATION_DIR)/tracelab $(MUTATION_DIR)/tests && mkdir -p $(MUTATION_DIR)/tracelab
	cp -r analysis flows reports queries $(MUTATION_DIR)/tracelab/
	cp analysis/_tracelab/__init__.py $(MUTATION_DIR)/tracelab/__init__.py
	cp -r tests pyproject.toml $(MUTATION_DIR)/

mutation: mutation-tree
	cd $(MUTATION_DIR) && $(CURDIR)/$(BIN)/mutmut run --max-children 2 $(strip $(MUTANTS)); \
	  $(CURDIR)/$(BIN)/mutmut results --all true > results.txt; \
	  grep -c ': killed' results.txt; grep -v ': killed' results.txt

## generates every mutant (without running any) and rewrites docs/mutation-sample.txt with the
## stratified sample drawn from them (tests/mutation_sample.py)
mutation-sample: mutation-tree
	cd $(MUTATION_DIR) && $(CURDIR)/$(BIN)/python tests/mutation_sample.py --generate mutants \
	  > $(CURDIR)/docs/mutation-sample.txt

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache
