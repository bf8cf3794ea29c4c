# Quick start: `make demo` and `make test` work on a fresh machine with only Python 3.11.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BASE_STAMP := $(VENV)/.installed-base

.PHONY: chromium postgresql demo test lint typecheck pytest pytest-main pytest-spark pytest-airflow \
	pytest-dagster test-min docs docs-serve docs-reference bench strip-notebooks clean

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH (or make PYTHON=python3)"; exit 3; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# the demo needs the package only
$(BASE_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	@touch $(BASE_STAMP)

# the dev tools, Airflow, a notebook kernel, PySpark and the docs' builder in one environment:
# mypy checks the provider and the Spark module against Airflow's and PySpark's types, their
# tests run in real Airflow (~40 s and ~240 MB more to install) and real Spark (~1 min and
# ~510 MB: PySpark bundles Spark's jars; Java 17 must be on the machine), the Dagster tests in
# real Dagster (~15 s more to install), the notebooks run in a kernel of this environment, and
# make docs builds the site with MkDocs
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[dev,sql,airflow,notebook,spark,dagster,docs]"
	@touch $(STAMP)

demo: $(BASE_STAMP)
	$(BIN)/churn-connector demo

LINTED := churn_connector tests benchmarks examples notebooks pyspark_churn.py churn_connector_cli.py docs/_tools

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

typecheck: $(STAMP)
	$(BIN)/mypy

# the screenshot test photographs a report in a real browser: Debian's chromium package
# (installed here when it is missing; apt needs root, as on the CI machine)
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# the ledger's tests start a PostgreSQL 15 server of their own on 127.0.0.1, as the system user
# postgres (the server refuses root): Debian's postgresql-15 package brings the binaries and
# the user (installed here when missing; apt needs root, as on the CI machine). Without them
# those tests fail saying what is missing: they never skip
PG_BIN ?= /usr/lib/postgresql/15/bin
export CHURN_TEST_PG_BIN := $(PG_BIN)

postgresql:
	@{ test -x $(PG_BIN)/pg_ctl && id -u postgres >/dev/null 2>&1; } || { \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null; }

# The suite runs in four pytest processes, side by side under make -j (make test does that).
# The Airflow, the Dagster and the Spark tests have processes of their own: Airflow's
# configuration, logging and SIGTERM handler are process-wide, and so are Dagster's logging
# and home, and a JVM and its SparkSession. The main one runs on every core (pytest-xdist,
# XDIST workers; each starts the servers it needs, tests/ledger/servers.py).
# tests/notebook/test_notebooks.py runs notebooks/ in a Jupyter kernel of this venv.
# Spark's Python workers run this venv's Python (PYSPARK_PYTHON); the Spark process gets a
# time limit, should a JVM ever hang.
# Coverage: each process writes its own file, added up when all four are done. The floor:
# the suite covers ~92% today; below 90% something lost its tests.
XDIST ?= auto
COVERED := --cov=churn_connector --cov-report=
PYTEST_PARTS := pytest-main pytest-spark pytest-airflow pytest-dagster
# make test checks for them once, first, and then runs its parts without them: a phony
# prerequisite runs each time, and held the long parts back while short ones took the slots
NEED_CHROMIUM := chromium
NEED_POSTGRESQL := postgresql

pytest-main: $(STAMP) $(NEED_CHROMIUM) $(NEED_POSTGRESQL)
	COVERAGE_FILE=.coverage.main $(BIN)/python -m pytest -q -n $(XDIST) $(COVERED)

pytest-airflow: $(STAMP) $(NEED_POSTGRESQL)
	COVERAGE_FILE=.coverage.airflow $(BIN)/python -m pytest -q tests/airflow $(COVERED)

pytest-dagster: $(STAMP)
	COVERAGE_FILE=.coverage.dagster $(BIN)/python -m pytest -q tests/dagster $(COVERED)

pytest-spark: $(STAMP) $(NEED_POSTGRESQL)
	COVERAGE_FILE=.coverage.spark PYSPARK_PYTHON=$(abspath $(BIN)/python) \
		timeout --kill-after=30 600 $(BIN)/python -m pytest -q tests/spark $(COVERED)

pytest: $(PYTEST_PARTS)
	$(BIN)/coverage combine --quiet $(PYTEST_PARTS:pytest-%=.coverage.%)
	$(BIN)/coverage report --skip-covered --fail-under=90

# the suite again on the oldest dependency versions pyproject.toml allows (constraints-min.txt),
# so the declared lower bounds stay true: the tests marked lower_bounds, those that exercise
# how the package uses its dependencies (tests/conftest.py says which, and why the others
# need not run twice)
MIN_VENV := .venv-min
MIN_STAMP := $(MIN_VENV)/.installed

$(MIN_STAMP): pyproject.toml constraints-min.txt
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH (or make PYTHON=python3)"; exit 3; }
	rm -rf $(MIN_VENV)
	$(PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MIN_VENV)/bin/python -m pip install --quiet -e ".[dev,notebook]" -c constraints-min.txt
	$(MIN_VENV)/bin/python -m pip check
	@touch $(MIN_STAMP)

test-min: $(MIN_STAMP)
	$(MIN_VENV)/bin/python -m pytest -q -p no:cacheprovider -n $(XDIST) -m lower_bounds

# everything a contributor runs before a push, JOBS parts at once: ruff and the docs first
# (seconds; a mistake there stops the rest early), then the longest first. Each part's output
# is printed whole when it ends. Installs come first, one at a time
JOBS ?= 4
test: $(STAMP) $(MIN_STAMP) chromium postgresql
	+@$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target NEED_CHROMIUM= NEED_POSTGRESQL= \
		lint docs pytest test-min typecheck

# the documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link, anchor or API
# reference fails, in the changelog and the tutorials too. Not --quiet, which hides the
# warnings strict mode counts: docs/_tools/build.py leaves out MkDocs's INFO lines only
# (tests/docs/test_docs_build.py plants broken links in a copy). Its Python examples run
# as tests in the suite (tests/docs/test_docs.py)
docs: $(STAMP)
	$(BIN)/python docs/_tools/build.py

# the built site, served on http://127.0.0.1:8000 (DOCS_PORT): its search runs in a web
# worker, which a browser does not start for a page opened from disk (file://)
DOCS_PORT ?= 8000
docs-serve: docs
	$(BIN)/python -m http.server $(DOCS_PORT) --bind 127.0.0.1 --directory site

# regenerate the reference pages' generated parts: the command line from its parsers, the
# checks table from churn_connector/_validate/checks.py (tests/docs/test_docs_reference.py checks both)
docs-reference: $(STAMP)
	$(BIN)/python tests/docs/test_docs_reference.py

# not part of make test: ~35 min here, ~20 of them instruction counts under valgrind
# (BENCH_ARGS="--quick": smaller sizes; "--skip callgrind"; see benchmarks/README.md)
# the harness runs in .venv (it starts the tests' PostgreSQL); the programs it measures run
# in .venv-bench, the package as users install it, without the test tools pandera would
# import at every start (benchmarks/harness.py, user_python)
BENCH_VENV := .venv-bench
bench: $(STAMP) postgresql
	@test $(VENV)/.bench-installed -nt pyproject.toml || { \
		$(BIN)/python -m pip install --quiet -e ".[dev,bench]" && touch $(VENV)/.bench-installed; }
	@test $(BENCH_VENV)/.installed -nt pyproject.toml || { \
		rm -rf $(BENCH_VENV) && $(PYTHON) -m venv $(BENCH_VENV) && \
		$(BENCH_VENV)/bin/python -m pip install --quiet -e ".[bench,sql]" && \
		touch $(BENCH_VENV)/.installed; }
	@# the package's bytecode, as a user's first run leaves it: where PYTHONDONTWRITEBYTECODE
	@# is set, every measured start would otherwise compile each module changed since
	@$(BENCH_VENV)/bin/python -m compileall -q churn_connector churn_connector_cli.py >/dev/null
	BENCH_PYTHON=$(CURDIR)/$(BENCH_VENV)/bin/python $(BIN)/python benchmarks/bench.py $(BENCH_ARGS)

# notebooks are committed without outputs (tests/notebook/test_notebooks.py checks)
strip-notebooks: $(STAMP)
	$(BIN)/python tests/notebook/test_notebooks.py

clean:
	rm -rf $(VENV) $(MIN_VENV) $(BENCH_VENV) .pytest_cache .mypy_cache .ruff_cache site .cache .coverage* \
		docs/tutorials/notebook-output
