# Ecdysis developer entry points. Every target sets up what it needs, so `make test` and `make demo` work on a
# fresh machine with nothing run before them. The venv install is stamped (redone only when pyproject.toml
# changes); the sandbox scripts are idempotent themselves (fast when Docker and the base image are ready).

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SETUP_STAMP := $(VENV)/.ecdysis-setup.stamp
DEMO_STAMP := $(VENV)/.ecdysis-demo.stamp
LOCAL_STAMP := $(VENV)/.ecdysis-local-runtime.stamp
PYTEST_ARGS ?=
# The suite runs its modules on this many pytest-xdist workers (a module stays on one worker, with its fixtures): most
# of its time is spent waiting on Ray, Docker, MariaDB, latency servers and subprocesses (beside two CPU hogs it took
# 1.33x its quiet time, not 2x), so 3 workers keep 2 cores busy. `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= 3
XDIST = $(if $(filter 0,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --dist loadfile)
# AgentBench's data is never part of the project, and the package looks for it only at $ECDYSIS_AGENTBENCH_DATA and in
# the user's cache (~/.cache/ecdysis/agentbench). Where the workplace keeps a shared copy in or beside this checkout
# (shared/agentbench with its MANIFEST.json), the tests, the study and the bench are pointed at it here, unless the
# environment already names one.
AGENTBENCH_SHARED := $(firstword $(wildcard $(CURDIR)/shared/agentbench/MANIFEST.json \
                                           $(CURDIR)/../shared/agentbench/MANIFEST.json))
ifneq ($(AGENTBENCH_SHARED),)
export ECDYSIS_AGENTBENCH_DATA ?= $(abspath $(dir $(AGENTBENCH_SHARED)))
endif

.PHONY: setup host-packages coding-agents local-runtime test test-fast coverage lint demo study bench sandbox-ready cluster-test cluster-bench

# Host packages first (the venv and the local-model runtime's build need them); each step checks before it installs.
setup: host-packages $(SETUP_STAMP) coding-agents

host-packages:
	bash sandbox/ensure-host-packages.sh

# The pinned external coding agents (OpenCode, aider) in the user's cache (~/.cache/ecdysis/coding-agents, or
# $ECDYSIS_CODING_AGENTS_DIR); two file checks when they are there.
coding-agents: host-packages
	bash sandbox/ensure-coding-agents.sh

$(PY):
	$(PYTHON) -m venv $(VENV)

$(SETUP_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -e '.[tau2,agentbench,dev,bench,mlflow]'
	touch $@

# What `make demo` needs and no more: the package with its benchmarks (no dev tools, no local-model runtime).
$(DEMO_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -e '.[tau2,agentbench]'
	touch $@

# The local-model runtime (llama-cpp-python, llama.cpp's llama-server, SmolLM2), compiled once into
# ~/.cache/ecdysis: the tests, a study and the bench need it; the demo does not (a live local round builds it on
# first use).
local-runtime: $(LOCAL_STAMP)

$(LOCAL_STAMP): $(SETUP_STAMP)
	$(PY) -m ecdysis.llm.local_setup
	touch $@

sandbox-ready:
	bash sandbox/ensure-docker.sh
	bash sandbox/build-base-image.sh

# pytest exits 5 when it collects no tests: that is a failure here, and said so.
test: setup sandbox-ready local-runtime
	@rc=0; $(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests" >&2; fi; \
	exit $$rc

# The quick tier: no Docker, process sandbox, Ray, MariaDB, browser, S3 server or coding-agent CLI; the in-memory
# sandbox and the scripted models. The markers are listed in pyproject.toml. Its tests are independent and short, so
# they are dealt out one by one to the workers (759 tests: 103 s in one process, 68 s on 2 workers, 2 quiet cores).
FAST_DESELECT := not (docker or sandbox or ray or mariadb or browser or s3 or coding_agent or slow or live or cluster)
FAST_WORKERS ?= 2
XDIST_FAST = $(if $(filter 0,$(FAST_WORKERS)),-p no:xdist,-n $(FAST_WORKERS))
test-fast: setup
	@rc=0; $(PY) -m pytest -q $(XDIST_FAST) -m "$(FAST_DESELECT)" $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests" >&2; fi; \
	exit $$rc

# Line coverage of ecdysis/ over the whole suite, CLI subprocesses and Ray workers included (pyproject.toml's
# [tool.coverage.run]); prints the per-file table and the total that tests/README.md keeps.
# tests/services/coverage_site saves a measured process's data before os._exit, which the `ecdysis` console script
# and Ray's workers end with (coverage.py would otherwise never save what a CLI subprocess ran).
COVERAGE_ENV := COVERAGE_FILE=$(CURDIR)/.coverage-data/.coverage \
	PYTHONPATH=$(CURDIR)/tests/services/coverage_site$(if $(PYTHONPATH),:$(PYTHONPATH))
coverage: setup sandbox-ready local-runtime
	@rm -rf .coverage-data && mkdir -p .coverage-data; rc=0; \
	$(COVERAGE_ENV) $(PY) -m coverage run -m pytest -q $(XDIST) $(PYTEST_ARGS) || rc=$$?; \
	$(COVERAGE_ENV) $(PY) -m coverage combine -q && $(COVERAGE_ENV) $(PY) -m coverage report --sort=cover; \
	exit $$rc

lint: setup
	$(VENV)/bin/ruff check ecdysis perf tests
	$(VENV)/bin/mypy ecdysis perf

demo: host-packages $(DEMO_STAMP) sandbox-ready
	$(VENV)/bin/ecdysis demo

# `make study STUDY=path/to/study.yaml [OUT=STUDY.md]`: the paper's configurations on one split (ecdysis/study);
# rerun it to resume after a kill: finished runs are skipped, and a finished study calls no model.
STUDY ?= ecdysis/configs/study-dbbench-qwen.yaml
OUT ?= STUDY.md
study: setup sandbox-ready local-runtime
	$(VENV)/bin/ecdysis study $(STUDY) --out $(OUT)

# Sections 5 and 6 (and the OS half of 8) need the Docker engine and the sandbox image.
bench: setup sandbox-ready local-runtime
	$(PY) -m perf

# The multi-node cluster in containers (cluster/local-cluster.sh): builds the node and S3 images, brings the cluster
# up, runs the end-to-end fault tests against it, and takes it down again (about 15 minutes here).
cluster-test: setup sandbox-ready
	@rc=0; bash cluster/local-cluster.sh up && ECDYSIS_CLUSTER_TESTS=1 $(PY) -m pytest -q -s tests/cluster || rc=$$?; \
	bash cluster/local-cluster.sh down; exit $$rc

# Rollouts per minute on the container cluster with 1 worker node against 2 (same latency server and tasks).
cluster-bench: setup sandbox-ready
	@rc=0; $(PY) -m perf.cluster_throughput $(ARGS) || rc=$$?; bash cluster/local-cluster.sh down; exit $$rc
