# The two commands the README gives: `make demo` and `make test`.
# Each creates .venv on first use and installs everything from this file and pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch first: pinning 2.13.0 keeps pip on the CPU build instead of the CUDA one.
TORCH := torch==2.13.0

.PHONY: demo test lint bench clean install

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e ".[local]"
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed-local
	$(BIN)/pip install --quiet -e ".[local,test]"
	touch $@

# `langgraph dev` runs on langgraph-api, which needs sse-starlette>=2; LangServe (in the
# `server` extra) pins sse-starlette<2. The dev server therefore gets its own environment,
# which the tests start `langgraph dev` from.
DEV_VENV := .venv-dev
$(DEV_VENV)/.installed: pyproject.toml
	test -x $(DEV_VENV)/bin/python || $(PYTHON) -m venv $(DEV_VENV)
	$(DEV_VENV)/bin/pip install --quiet $(TORCH)
	$(DEV_VENV)/bin/pip install --quiet -e ".[local,dev-server]"
	touch $@

# The panel's browser tests drive Debian's Chromium (Playwright cannot download browsers here).
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium

install: $(VENV)/.installed-local

demo: $(VENV)/.installed-local
	HF_HUB_OFFLINE=1 $(BIN)/python examples/demo.py

test: $(VENV)/.installed-test $(DEV_VENV)/.installed $(CHROMIUM)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest
	# The isolation tests again with row-level security on (off by default, README).
	LANGMEM_RLS=1 HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q tests/test_isolation_rls.py tests/test_isolation_audit.py tests/test_isolation_schema.py
	$(BIN)/ruff check .
	$(BIN)/mypy

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(VENV)/.installed-test
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/store_bench.py

clean:
	rm -rf $(VENV) $(DEV_VENV) .langmem .pytest_cache .mypy_cache .ruff_cache
