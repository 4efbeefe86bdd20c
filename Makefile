# Two entry points for a fresh machine: `make demo` and `make test`.
# Each prepares what it needs first (venv, package, Chromium, PostgreSQL), idempotently.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test setup lint typecheck unit clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

setup: $(STAMP)
	bash scripts/ensure-system-deps.sh $(PY)

demo: setup
	$(PY) demos/fake_clock.py
	$(PY) demos/fake_clock.py --real

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

test: setup lint typecheck
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
