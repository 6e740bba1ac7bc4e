PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.demo-installed
STAMP := $(VENV)/.installed

# What the demo needs: onion's own dependencies (pyproject's `dependencies`), quoted for the shell.
DEPENDENCIES = $(shell $(PYTHON) -c "import tomllib; print(' '.join(repr(d) for d in tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))")

.PHONY: demo test bench soak lint docs clean

# `make demo` first: a virtualenv with onion's dependencies only (pydantic, tenacity); the demo runs onion from
# this checkout. The virtualenv is made without pip, and this Python's pip installs into it (`pip --python`),
# when this Python's pip can; else the virtualenv gets a pip of its own.
$(DEMO_STAMP): pyproject.toml
	@$(PYTHON) -c "import sys; sys.exit(sys.version_info < (3, 11) and 'make: onion needs Python 3.11+: make PYTHON=python3.11')"
	@echo "make: installing what the demo needs (pydantic, tenacity) into $(VENV); make test installs the rest"
	@test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV)
	@if $(PYTHON) -m pip --python $(BIN)/python --version >/dev/null 2>&1; then \
		$(PYTHON) -m pip --python $(BIN)/python install -q $(DEPENDENCIES); \
	else \
		$(BIN)/python -m ensurepip >/dev/null && $(BIN)/python -m pip install -q $(DEPENDENCIES); \
	fi
	@touch $@

# Everything the tests, lint, docs and benchmarks use: onion itself (editable) with its `dev` extra.
$(STAMP): $(DEMO_STAMP) pyproject.toml Makefile
	@echo "make: installing onion with what the tests, lint and docs use (.[dev]: the SDKs, temporal, mkdocs, ...)"
	@$(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip >/dev/null
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $@

# AgentDojo in a venv of its own (bench/agentdojo/__init__.py), so onion's never depends on it: the suite runs its
# smoke test (tests/bench/test_agentdojo.py), `make bench` the whole benchmark.
AGENTDOJO := bench/.agentdojo-venv
$(AGENTDOJO)/.installed:
	@echo "make: installing AgentDojo 0.1.35 into $(AGENTDOJO) (its own venv)"
	@test -x $(AGENTDOJO)/bin/python || $(PYTHON) -m venv $(AGENTDOJO)
	$(AGENTDOJO)/bin/python -m pip install -q agentdojo==0.1.35
	@touch $@

demo: $(DEMO_STAMP)
	$(BIN)/python -m onion demo

lint: $(STAMP)
	@echo "make: ruff check (lint) and ruff format --check"
	$(BIN)/ruff check onion middleware tests examples bench
	$(BIN)/ruff format --check onion middleware
	@echo "make: mypy --strict on onion, middleware and examples (about a minute on a fresh clone, seconds after)"
	$(BIN)/mypy
	@echo "make: lint and type-check passed"

test: $(STAMP) $(AGENTDOJO)/.installed lint
	@echo "make: pytest, the whole suite (a few minutes; the slowest tests are listed at the end)"
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=10

# The documentation site, built offline from docs/ into site/ (open site/index.html; search needs it served,
# e.g. `python -m http.server -d site`). The suite builds it too (tests/docs/test_site.py).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

bench: $(STAMP) $(AGENTDOJO)/.installed
	$(BIN)/python -m bench

# The soak of tests/test_soak.py at 2,000 runs (ONION_SOAK_RUNS, ONION_SOAK_SEED, ONION_SOAK_AT_ONCE override).
soak: $(STAMP)
	ONION_SOAK_RUNS=$${ONION_SOAK_RUNS:-2000} $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_soak.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache site tests/onion/serve/ag_ui_client/node_modules
