# Two entry points for a fresh machine: `make demo` and `make test` (what CI runs).
# Each prepares what it needs first (venv, package, Chromium, PostgreSQL), idempotently.
# `make help` lists every target with its one-line description.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# `make check` runs only the tests that need neither a browser nor a database server.
FAST   := not chromium and not postgres and not slow
# Line coverage of session_keeper measured over the full suite (92.4% in Nov 2026) minus
# about two points: a drop below it fails `make test`.
COVERAGE_FLOOR := 90

.DEFAULT_GOAL := help
.PHONY: help setup demo lint typecheck check test docs diagrams bench chaos clean

help: ## list the targets
	@awk -F ':.*## ' '/^[a-z]+:.*## / { printf "  make %-10s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

# The venv with the package (editable) and its dev, bench and docs extras; redone when
# pyproject.toml changes.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench,docs]'
	touch $(STAMP)

setup: $(STAMP) ## venv, package and the system parts (Chromium, PostgreSQL) tests need
	bash scripts/ensure-system-deps.sh $(PY)

demo: setup ## the fake-clock demo (in-memory, then real Chromium), then three MCP chat agents
	$(PY) demos/fake_clock.py
	$(PY) demos/fake_clock.py --real
	$(PY) demos/chat_agents.py

lint: $(STAMP) ## ruff check, ruff format --check, and the layer rule (import-linter)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: $(STAMP) ## mypy --strict over the package, tests, demos and benchmarks
	$(VENV)/bin/mypy

check: lint typecheck ## lint, types and the tests that need neither Chromium nor PostgreSQL
	$(PY) -m pytest -q -m '$(FAST)' $(PYTEST_ARGS)

# TEST_WORKERS pytest-xdist processes (2: CI's two cores; most tests wait on a browser or a
# server, so two keep both cores busy). Each file runs whole in one worker (module fixtures
# made once); session fixtures (sites, PostgreSQL, the SSO and OTP sites) are per worker.
# Files are handed out in collection order (--no-loadscope-reorder), which tests/conftest.py
# makes the slowest files first: the run does not end on one worker's two-minute file.
# TEST_WORKERS=0 runs in this process. --durations=20: the slowest 20 tests end the output.
TEST_WORKERS ?= 2
test: setup lint typecheck ## lint, types and every test, with the coverage floor (CI runs this)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=20 \
		--cov=session_keeper --cov-report=term-missing:skip-covered \
		--cov-fail-under=$(COVERAGE_FLOOR) $(PYTEST_ARGS)

# NO_MKDOCS_2_WARNING: the theme's end-of-life notice (May 2027) is news, not a build fault.
docs: $(STAMP) ## the docs site (guides, concepts, API reference), built strictly into site/
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# The README's diagram as an image, for pages that cannot draw mermaid (a package index):
# each docs/images/NAME.mmd becomes NAME.png. npm's mermaid-cli drives the Chromium the
# tests use (SESSION_KEEPER_CHROMIUM, else /usr/bin/chromium); nothing else is downloaded.
CHROMIUM ?= $(or $(SESSION_KEEPER_CHROMIUM),/usr/bin/chromium)
diagrams: ## render docs/images/*.mmd to PNG (npm's @mermaid-js/mermaid-cli, system Chromium)
	cd scripts/diagrams && PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-audit --no-fund --silent
	sed 's|"/usr/bin/chromium"|"$(CHROMIUM)"|' scripts/diagrams/puppeteer.json > scripts/diagrams/.puppeteer.json
	for f in docs/images/*.mmd; do \
		scripts/diagrams/node_modules/.bin/mmdc -p scripts/diagrams/.puppeteer.json \
			-i $$f -o $${f%.mmd}.png -s 2 -b white || exit 1; done

# Benchmarks are not tests: `make test` never runs them. About 5 minutes on 2 cores.
bench: setup ## run the benchmark rows against their peers and write BENCHMARKS.md
	PYTHONPATH=$(CURDIR) $(PY) benchmarks/run_all.py

# FAULT_TRIALS trials per fault and store (20 by default; CI's `make test` runs the same
# tests, marked `chaos`, at 3 each, 1 where a trial is a whole browser: tests/_chaos.py).
# Its duration is written into RELIABILITY.md's header.
FAULT_TRIALS ?= 20
chaos: setup ## run the fault matrix, the attack rows and the soaks; write RELIABILITY.md
	PYTHONPATH=$(CURDIR) $(PY) scripts/write_reliability.py --trials $(FAULT_TRIALS)

clean: ## remove the venv, caches, coverage data and the built docs
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .coverage site
