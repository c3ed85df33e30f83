# Two commands do everything on a fresh machine: `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LAKE ?= lake
CONF ?= conf/broker.xml

.PHONY: setup run test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python 3.11)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

run: setup
	$(PY) -m jobs.demo --lake $(LAKE) --conf $(CONF) --fresh

test: setup
	$(PY) -m ruff check .
	$(PY) -m pytest -q tests

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

bench: setup
	$(PY) -m bench

clean:
	rm -rf $(LAKE) .pytest_cache spark-warehouse metastore_db
