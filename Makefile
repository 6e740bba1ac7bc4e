PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench soak lint docs clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m onion demo

lint: $(STAMP)
	$(BIN)/ruff check onion middleware tests examples bench
	$(BIN)/ruff format --check onion middleware
	$(BIN)/mypy

test: $(STAMP) lint
	$(BIN)/python -m pytest -q -p no:cacheprovider

# The documentation site, built offline from docs/ into site/ (open site/index.html; search needs it served,
# e.g. `python -m http.server -d site`). The suite builds it too (tests/docs/test_site.py).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

bench: $(STAMP)
	$(BIN)/python -m bench

# The soak of tests/test_soak.py at 2,000 runs (ONION_SOAK_RUNS, ONION_SOAK_SEED, ONION_SOAK_AT_ONCE override).
soak: $(STAMP)
	ONION_SOAK_RUNS=$${ONION_SOAK_RUNS:-2000} $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_soak.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache site
