# GPU topology course. `make` or `make help` lists the targets.
# Every target that needs Python installs first through environment/install.sh (the same script
# the Dockerfile and the Apptainer definition run); a second run skips what is done and says so.

SHELL := /bin/bash
.DEFAULT_GOAL := help

# FRAMEWORK=pytorch: PyTorch, no TensorFlow, in .venv-pytorch (on a Python that already has
# PyTorch, else PyTorch from PyPI); FRAMEWORK=tensorflow: the pinned TensorFlow 2.15.1 set in .venv.
# Empty: the machine decides, by the rule of `environment/install.sh --help` (its one
# implementation is environment/flavour.sh, asked once per make run, only by targets that need it).
FRAMEWORK ?=
VENV_GIVEN := $(filter command line environment override,$(origin VENV))
FLAVOUR_ASK = bash environment/flavour.sh $(if $(VENV_GIVEN),--venv $(VENV)) --print framework
ASK_ONCE = $(shell $(FLAVOUR_ASK) 2>/dev/null || echo tensorflow)
AUTO_FRAMEWORK = $(eval AUTO_FRAMEWORK := $(ASK_ONCE))$(AUTO_FRAMEWORK)
CHOSEN_FRAMEWORK = $(or $(FRAMEWORK),$(AUTO_FRAMEWORK))
VENV   ?= $(if $(filter pytorch,$(CHOSEN_FRAMEWORK)),.venv-pytorch,.venv)
PY     := $(VENV)/bin/python
PORT   ?= 8888
# Extra arguments for `jupyter lab` (e.g. LAB_ARGS=--no-browser), and extra pytest arguments.
LAB_ARGS ?=
PYTEST_ARGS ?=
# SKIP_INSTALL=1 runs a target against the existing $(VENV) without calling install.sh.
SKIP_INSTALL ?=
CUDA_DIRS := source_code/p2pBandwidthLatencyTest source_code/nccl_bench source_code/host_copy_bench
INSTALL = bash environment/install.sh --venv $(VENV)$(if $(FRAMEWORK), --framework $(FRAMEWORK))
# What runs under make (pytest, notebooks, JupyterLab's kernels) must not inherit make's own
# variables: a `make` they start would then act as a sub-make (e.g. print "Entering directory").
CLEAN_ENV := env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS -u MAKEOVERRIDES
# The venv's bin folder first on PATH for JupyterLab's and nbval's kernels (their Python is
# $(PY)), so that what a notebook types (`!python`, `!horovodrun`, `!torchrun`) is the course's
# environment. `make course` does the same in coursetools.course's kernel_environment.
VENV_FIRST = PATH="$(abspath $(VENV))/bin:$$PATH"

# NVLink SHARP (NVLS) is off by default in the course, although NCCL turns it on by itself on
# NVSwitch nodes: on shared or virtualised nodes, where workshops usually run, the multicast
# resources may be taken or absent, and from NCCL 2.29 a failed NVLS set-up fails the job at
# init (NCCL's env docs, NCCL_NVLS_ENABLE). An instructor with a dedicated NVSwitch node opts in
# by exporting NCCL_NVLS_ENABLE=1 before `make` (?= keeps it).
export NCCL_NVLS_ENABLE ?= 0

.PHONY: help lab test test-machines check course build clean distclean install lock

help: ## this list
	@echo "GPU topology course -- make targets:"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | awk -F'\t' '{printf "  make %-13s %s\n", $$1, $$2}'
	@echo "Variables: FRAMEWORK=$(FRAMEWORK) (tensorflow|pytorch; empty: the machine decides)"
	@echo "  PORT=$(PORT) VENV=$(VENV) LAB_ARGS='$(LAB_ARGS)' PYTEST_ARGS='$(PYTEST_ARGS)' SKIP_INSTALL=$(SKIP_INSTALL)"
	@echo "Start here: README.md (learners: make lab; instructors: make check, then make course)."

install: ## create the venv (.venv, or VENV=DIR) if missing and install the pinned environment (idempotent)
	@if [ -n "$(SKIP_INSTALL)" ]; then echo "[make] SKIP_INSTALL set: using $(VENV) as it is"; \
	else $(INSTALL) --with-dataset; fi

# The token reaches JupyterLab through the environment (JUPYTER_TOKEN, which jupyter_server reads),
# never the command line: any user of a shared node can read a command line with `ps`, while
# /proc/<pid>/environ is readable only by the owner.
lab: ## JupyterLab at Start_Here.ipynb on 127.0.0.1:PORT (default 8888), with a token; prints the URL
	@if [ -n "$(SKIP_INSTALL)" ]; then echo "[make] SKIP_INSTALL set: using $(VENV) as it is"; \
	else $(INSTALL) --with-dataset --with-lab; fi
	@token=$${JUPYTER_TOKEN:-$$($(PY) -c 'import secrets; print(secrets.token_hex(24))')}; \
	export JUPYTER_TOKEN="$$token"; \
	export CUDA_DEVICE_ORDER=PCI_BUS_ID; \
	url="http://127.0.0.1:$(PORT)/lab/tree/Start_Here.ipynb?token=$$token"; \
	echo ""; \
	echo "[make] JupyterLab is starting. Open this URL in your browser (Ctrl-C here stops it):"; \
	echo "[make]   $$url"; \
	echo "[make] On a remote machine first tunnel the port: ssh -L $(PORT):127.0.0.1:$(PORT) <host>"; \
	echo ""; \
	exec $(CLEAN_ENV) $(VENV_FIRST) $(PY) -m jupyter lab --ip=127.0.0.1 --port=$(PORT) --ServerApp.port_retries=0 \
	  --ServerApp.root_dir="$(CURDIR)" \
	  --ServerApp.default_url=/lab/tree/Start_Here.ipynb $$([ "$$(id -u)" = 0 ] && echo --allow-root) $(LAB_ARGS)

# pytest exit codes: 0 all passed, 1 some failed, 5 no test collected. 5 is a failure here,
# said in plain words, so CI can never pass on an empty run.
test: install ## install, then every test: unit tests, nbval on every notebook, CUDA compiles
	@$(PY) -c 'import pytest, nbval' 2>/dev/null || { echo "[make] $(PY) has no pytest/nbval; run without SKIP_INSTALL" >&2; exit 1; }
	@bash environment/install-test-tools.sh --venv $(VENV)
	@echo "[make] $(PY) -m pytest tests --nbval-lax Start_Here.ipynb notebooks/ $(PYTEST_ARGS)"; \
	rc=0; GPUTOPO_REQUIRE_DATASET=$${GPUTOPO_REQUIRE_DATASET:-1} \
	  $(CLEAN_ENV) $(VENV_FIRST) $(PY) -m pytest tests --nbval-lax Start_Here.ipynb notebooks/ $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "[make] FAILED: pytest ran no test (exit 5: nothing collected, or all deselected); that is not a pass" >&2; exit 1; fi; \
	if [ $$rc -ne 0 ]; then echo "[make] FAILED: pytest exit $$rc (see the summary above)" >&2; fi; \
	exit $$rc

test-machines: install ## only the machine matrix: the whole course on 13 stand-in machines and make course here (about 4 min; make test runs it too)
	@$(CLEAN_ENV) $(PY) -m pytest tests/test_machines_notebooks.py $(PYTEST_ARGS)

lock: ## regenerate environment/requirements-*.lock.txt (hash-pinned) from requirements-*.txt; needs PyPI
	bash environment/lock.sh

# FRAMEWORK and VENV reach the check, so that before the install its fix lines name this flavour's
# venv and install command (a package missing in the system python3 is a WARN, not a FAIL).
# JSON=1: the same findings as one JSON object (python -m coursetools.check --json).
# LADDER=1: also climb the P2P ladder's GPU rungs (build the P2P test and nccl_bench if missing,
# then run them briefly on the chosen pair; python -m coursetools.check --ladder). Rung 1 always runs.
# Without FRAMEWORK, a PyTorch pick of the rule is passed on too (the check cannot read it from a
# venv that is not installed yet); TensorFlow is the check's own default.
CHECK_FRAMEWORK = $(if $(or $(FRAMEWORK),$(filter pytorch,$(CHOSEN_FRAMEWORK))),$(CHOSEN_FRAMEWORK))
CHECK_ARGS = --venv $(VENV)$(if $(CHECK_FRAMEWORK), --framework $(CHECK_FRAMEWORK))$(if $(JSON), \
  --json)$(if $(LADDER), --ladder)
check: ## instructor preflight: one page of PASS/WARN/FAIL (stdlib only; works before any install); LADDER=1 adds the P2P ladder's GPU rungs
	@bash environment/flavour.sh --venv $(VENV)$(if $(FRAMEWORK), --framework $(FRAMEWORK)) \
	  --print why | sed 's/^/[make] install: /' >&2
	@if [ -x $(PY) ]; then PYTHONPATH=source_code $(PY) -m coursetools.check $(CHECK_ARGS); \
	else echo "[make] no $(VENV) yet: running the check with the system python3" >&2; PYTHONPATH=source_code python3 -m coursetools.check $(CHECK_ARGS); fi

course: install ## instructor: execute every notebook headless; dated report under results/
	$(CLEAN_ENV) $(PY) -m coursetools.course

build: ## compile the CUDA programs (P2P test, NCCL benchmark); needs nvcc
	@for d in $(CUDA_DIRS); do \
	  [ -f $$d/Makefile ] || { echo "[make] $$d/Makefile is missing" >&2; exit 1; }; \
	  $(MAKE) -C $$d || { echo "[make] FAILED: build in $$d" >&2; exit 1; }; done

clean: ## remove build outputs and caches (keeps the venv and results/)
	@for d in $(CUDA_DIRS); do [ -f $$d/Makefile ] && $(MAKE) -C $$d clean || true; done
	rm -rf .pytest_cache build
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean ## also remove the venv (the next make lab/test rebuilds it, Horovod included)
	rm -rf $(VENV)

# The GPU image's riskiest step, install.sh --gpu (TensorFlow's GPU wheel, Horovod's NCCL operations
# against CUDA 12.2 and NCCL 2.19), rehearsed without a GPU in build/rehearse-gpu (its own venv).
# Not part of `make test`: it takes longer than make test may grow (docs/maintainer.md, Tests).
.PHONY: rehearse-gpu rehearse-wheels
rehearse-gpu: ## rehearse the GPU image's install.sh --gpu here, without a GPU (long; log in build/rehearse-gpu)
	bash environment/rehearse-gpu.sh

# A GPU machine with only a driver: PyTorch from PyPI (requirements-pytorch-pypi.lock.txt) installed
# by install.sh, Horovod's NCCL operations and both CUDA programs built against NVIDIA's wheels
# alone, with this machine's CUDA hidden (a mount namespace; root). No GPU needed. About 3 GB of
# wheels (kept in build/rehearse-wheels/wheels for the next run); not part of `make test`.
rehearse-wheels: ## rehearse a driver-only GPU machine: PyTorch, nvcc, NCCL from PyPI (long; 3 GB)
	bash environment/rehearse-wheels.sh
