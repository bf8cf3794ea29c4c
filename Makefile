# Quick start: `make demo` and `make test` work on a fresh machine with only Python 3.11.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench readme strip-notebooks clean

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH (or make PYTHON=python3)"; exit 3; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[dev,notebook]"
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/churn-connector demo

lint: $(STAMP)
	$(BIN)/ruff check churn_connector tests benchmarks notebooks
	$(BIN)/ruff format --check churn_connector tests benchmarks notebooks

typecheck: $(STAMP)
	$(BIN)/mypy

# coverage floor: the suite covers ~94% today; below 90% something lost its tests.
# tests/test_notebooks.py runs notebooks/ in a Jupyter kernel of this venv (~1 min)
pytest: $(STAMP)
	$(BIN)/python -m pytest -q --cov=churn_connector --cov-report=term:skip-covered \
		--cov-fail-under=90

test: lint typecheck pytest

# not part of make test: ~10-15 min (BENCH_ARGS="--quick" ~3 min; see benchmarks/README.md)
bench: $(STAMP)
	@test $(VENV)/.bench-installed -nt pyproject.toml || { \
		$(BIN)/python -m pip install --quiet -e ".[dev,bench]" && touch $(VENV)/.bench-installed; }
	$(BIN)/python benchmarks/bench.py $(BENCH_ARGS)

# regenerate the README's table of validation checks from the registry
readme: $(STAMP)
	$(BIN)/python -m churn_connector._checks --update README.md

# notebooks are committed without outputs (tests/test_notebooks.py checks)
strip-notebooks: $(STAMP)
	$(BIN)/python tests/test_notebooks.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
