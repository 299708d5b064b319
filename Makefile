# The two commands a newcomer needs: `make demo` and `make test` (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
POLICY_VENV := policies/.venv
CHECKOV_VENV := .venvs/checkov
NPM_TOOLS := tools/npm
SITE = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
PIP_FLAGS := --quiet --disable-pip-version-check
# The locks are resolved for CPython 3.11 (`make lock`); another minor (Ubuntu 24.04's python3 is 3.12) would
# fail halfway through pip on a pinned wheel it cannot use. Said before any virtualenv is made.
PYTHON_MINOR := 3.11
define check_python
@v=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); \
  [ "$$v" = "$(PYTHON_MINOR)" ] || { echo "make: PYTHON=$(PYTHON) is Python $${v:-(not found)}; the locks are resolved for Python $(PYTHON_MINOR): install it and run make PYTHON=python$(PYTHON_MINOR) ..." >&2; exit 2; }
endef
PACKAGES := infra policies training serving monitoring promotion pipeline demo containers benchmarks localservers

.PHONY: help setup envs test test-unit lint plan policy bench bench-images images demo demo-fast lock clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

# --- environments -----------------------------------------------------------
# Each environment is rebuilt only when its lock file changes (stamp files), so
# a second `make setup` does nothing and returns in well under 10 s.
setup: envs $(NPM_TOOLS)/node_modules/.installed  ## create/refresh the three virtualenvs and the node test tools

# The three virtualenvs alone: what every target but `test` needs. The node tools are test tools
# (Azurite, the SARIF validator): `make demo` on a machine without npm must not stop at `npm ci`.
ENVS := $(VENV)/.installed $(POLICY_VENV)/.installed $(CHECKOV_VENV)/.installed
envs: $(ENVS)

# Every lock carries the sha256 of each file it allows (`make lock`); pip installs in
# hash-checking mode, so a changed or substituted wheel fails the install.
# torch's CPU build is only on PyTorch's own index, which requirements/torch-cpu.lock.txt declares:
# it is installed first and alone (--no-deps: only torch is looked up on that index), then the
# full lock finds it installed.
$(VENV)/.installed: requirements/lock.txt requirements/torch-cpu.lock.txt
	$(check_python)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install $(PIP_FLAGS) --require-hashes --no-deps -r requirements/torch-cpu.lock.txt
	$(VENV)/bin/pip install $(PIP_FLAGS) --require-hashes -r requirements/lock.txt
	@# The repository root on the venv's path: `python -m training` etc. work from anywhere.
	echo "$(CURDIR)" > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/eu_ml_platform.pth"
	touch $@

# The CrossGuard pack gets its own venv (pulumi-policy pins protobuf 5, which
# onnx and tritonclient cannot share), exactly as `pulumi preview --policy-pack` expects.
$(POLICY_VENV)/.installed: requirements/policies.lock.txt
	$(check_python)
	$(PYTHON) -m venv $(POLICY_VENV)
	$(POLICY_VENV)/bin/pip install $(PIP_FLAGS) --require-hashes -r requirements/policies.lock.txt
	touch $@

# Checkov pins packaging<24, which breaks pulumi: it lives apart too.
$(CHECKOV_VENV)/.installed: requirements/checkov.lock.txt
	$(check_python)
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install $(PIP_FLAGS) --require-hashes -r requirements/checkov.lock.txt
	touch $@

# Node tools the tests start (Azurite, the Azure Storage emulator) or call
# (Microsoft's SARIF validator), at the exact versions of package-lock.json.
$(NPM_TOOLS)/node_modules/.installed: $(NPM_TOOLS)/package-lock.json
	cd $(NPM_TOOLS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# uv (and requirements/plain_pins.py) run from .venv: a fresh clone builds it from the current locks first.
# uv resolves for the machines the locks serve (CPython 3.11.7, x86-64 glibc 2.35+) and records the
# hash of every file of each pinned release. An existing lock's versions are kept unless a
# requirement forces a change (UPGRADE=1 moves everything to the newest allowed).
UV := $(VENV)/bin/uv
TORCH_INDEX := https://download.pytorch.org/whl/cpu
# Where the CPU torch wheel is found while compiling: a machine-local wheel folder if there is
# one (CI images ship it), else PyTorch's index. The lock itself always names PyTorch's index.
TORCH_SOURCE = $(if $(wildcard /opt/wheels/torch-*),--find-links /opt/wheels,--extra-index-url $(TORCH_INDEX))
UV_COMPILE = $(UV) pip compile --quiet --generate-hashes --no-header --python-version 3.11.7 \
	--python-platform x86_64-manylinux_2_35 --index-strategy unsafe-best-match --no-strip-extras $(if $(UPGRADE),--upgrade)
LOCK_HEADER = \# $(1)\n\# Compiled by `make lock` (uv pip compile --generate-hashes) from $(2); do not edit.\n\# Installed with pip in hash-checking mode (make setup).\n

lock: $(VENV)/.installed  ## recompile the hashed locks (requirements/*.txt) with uv after changing pyproject.toml or requirements/*.in
	$(UV_COMPILE) $(TORCH_SOURCE) --all-extras pyproject.toml requirements/project.in -o requirements/lock.txt
	$(UV_COMPILE) requirements/policies.in -o requirements/policies.lock.txt
	$(UV_COMPILE) requirements/checkov.in -o requirements/checkov.lock.txt
	$(VENV)/bin/python requirements/plain_pins.py requirements/lock.txt requirements/policies.lock.txt requirements/checkov.lock.txt
	printf '$(call LOCK_HEADER,Project virtualenv (.venv): every package with its hashes.,pyproject.toml (all extras) and requirements/project.in)' | cat - requirements/lock.txt > requirements/lock.txt.new && mv requirements/lock.txt.new requirements/lock.txt
	printf '$(call LOCK_HEADER,Policy pack virtualenv (policies/.venv): pulumi-policy pins protobuf 5.,requirements/policies.in)' | cat - requirements/policies.lock.txt > requirements/policies.lock.txt.new && mv requirements/policies.lock.txt.new requirements/policies.lock.txt
	printf '$(call LOCK_HEADER,Checkov virtualenv (.venvs/checkov): it pins packaging<24.,requirements/checkov.in)' | cat - requirements/checkov.lock.txt > requirements/checkov.lock.txt.new && mv requirements/checkov.lock.txt.new requirements/checkov.lock.txt
	{ printf '# The CPU build of torch, from PyTorch'"'"'s own index (declared here: a fresh machine needs no\n# environment variable). Written by `make lock` from requirements/lock.txt; installed first, --no-deps.\n'; \
	  echo '--extra-index-url $(TORCH_INDEX)'; \
	  awk '/^torch==/{p=1} p&&!/^[ ]/&&!/^torch==/{p=0} p' requirements/lock.txt; } > requirements/torch-cpu.lock.txt

# --- the two commands ------------------------------------------------------
demo: envs  ## run the whole lifecycle locally (plan, policy, train, export, serve, monitor, promote)
	$(PY) -m demo

demo-fast: envs  ## the same lifecycle with the tiny `smoke` model (what CI runs; the gates may promote or reject it)
	$(PY) -m demo --fast

test: setup  ## set up and run every test (unit + integration)
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: setup  ## only the fast unit tests
	$(PY) -m pytest -m "not integration" $(PYTEST_ARGS)

# --- the parts ---------------------------------------------------------------
lint: envs  ## ruff, mypy (every package), hadolint, checkov over Dockerfiles, shellcheck over workflow scripts and .ci/run
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $(PACKAGES)
	$(PY) -m containers.lint
	$(PY) -m containers.requirements --check
	$(PY) -m containers.docs --check
	@# shellcheck (Debian package) over every workflow `run:` script and .github/scripts/*.sh, and CI's entry point.
	$(PY) .github/scripts/shellcheck_runs.py
	shellcheck .ci/run

plan: envs  ## render every committed stack offline into reports/plan/<stack>.json
	$(PY) -m infra.plan --out reports/plan

policy: plan  ## run the policy pack over every plan; compliance report in reports/
	$(PY) -m policies.report --plans reports/plan --out reports

# benchmarks.policy reads the plans in reports/plan (benchmarks.plan renders into a temporary folder).
bench: plan  ## run the CPU benchmarks; JSON in reports/bench/ (GPU: python -m benchmarks.train_gpu / serve_gpu)
	$(PY) -m benchmarks.plan
	$(PY) -m benchmarks.policy
	$(PY) -m benchmarks.train
	$(PY) -m benchmarks.serve
	$(PY) -m benchmarks.serve_split
	$(PY) -m benchmarks.monitoring
	$(PY) -m benchmarks.tune
	$(PY) -m benchmarks.team_scale
	$(PY) -m benchmarks.demo

bench-images: envs  ## image build times and sizes (root + buildah); reports/bench/images.json
	$(PY) -m benchmarks.images

images: envs  ## build the training and serving images (Docker if an engine runs, else buildah)
	$(PY) -m containers.build $(IMAGES_ARGS)

# reports/ is git-ignored but holds committed benchmark runs (reports/bench/*.json) that the READMEs cite:
# remove only what is not tracked (git clean -X); outside a git checkout, everything but reports/bench.
clean:  ## remove generated reports (not the venvs, not the committed benchmark results)
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	  git clean -fdXq -- reports; \
	else \
	  [ ! -d reports ] || find reports -mindepth 1 -maxdepth 1 ! -name bench -exec rm -rf {} +; \
	fi
