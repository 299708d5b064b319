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

.PHONY: help setup test test-unit lint plan policy bench bench-images images demo demo-fast lock clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

# --- environments -----------------------------------------------------------
# Each environment is rebuilt only when its lock file changes (stamp files), so
# a second `make setup` does nothing and returns in well under 10 s.
setup: $(VENV)/.installed $(POLICY_VENV)/.installed $(CHECKOV_VENV)/.installed $(NPM_TOOLS)/node_modules/.installed  ## create/refresh the three virtualenvs and the node test tools

$(VENV)/.installed: requirements/lock.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install $(PIP_FLAGS) -r requirements/lock.txt
	@# The repository root on the venv's path: `python -m training` etc. work from anywhere.
	echo "$(CURDIR)" > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/eu_ml_platform.pth"
	touch $@

# The CrossGuard pack gets its own venv (pulumi-policy pins protobuf 5, which
# onnx and tritonclient cannot share), exactly as `pulumi preview --policy-pack` expects.
$(POLICY_VENV)/.installed: requirements/policies.lock.txt
	$(PYTHON) -m venv $(POLICY_VENV)
	$(POLICY_VENV)/bin/pip install $(PIP_FLAGS) -r requirements/policies.lock.txt
	touch $@

# Checkov pins packaging<24, which breaks pulumi: it lives apart too.
$(CHECKOV_VENV)/.installed: requirements/checkov.lock.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install $(PIP_FLAGS) -r requirements/checkov.lock.txt
	touch $@

# Node tools the tests start (Azurite, the Azure Storage emulator) or call
# (Microsoft's SARIF validator), at the exact versions of package-lock.json.
$(NPM_TOOLS)/node_modules/.installed: $(NPM_TOOLS)/package-lock.json
	cd $(NPM_TOOLS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

lock:  ## re-pin requirements/lock.txt from the current .venv (after adding a dependency)
	{ grep '^#' requirements/lock.txt; $(VENV)/bin/pip freeze --exclude-editable; } > requirements/lock.txt.new
	mv requirements/lock.txt.new requirements/lock.txt

# --- the two commands ------------------------------------------------------
demo: setup  ## run the whole lifecycle locally (plan, policy, train, export, serve, promote)
	$(PY) -m demo

demo-fast: setup  ## the same lifecycle with the tiny `smoke` model (what CI runs; the gates reject it)
	$(PY) -m demo --fast

test: setup  ## set up and run every test (unit + integration)
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: setup  ## only the fast unit tests
	$(PY) -m pytest -m "not integration" $(PYTEST_ARGS)

# --- the parts ---------------------------------------------------------------
lint: setup  ## ruff, mypy (infra, policies), hadolint, checkov over Dockerfiles
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy infra policies
	$(PY) -m containers.lint
	$(PY) -m containers.requirements --check
	$(PY) -m containers.docs --check

plan: setup  ## render every committed stack offline into reports/plan/<stack>.json
	$(PY) -m infra.plan --out reports/plan

policy: plan  ## run the policy pack over every plan; compliance report in reports/
	$(PY) -m policies.report --plans reports/plan --out reports

bench: setup  ## run the benchmarks; JSON in reports/bench/
	$(PY) -m benchmarks.plan
	$(PY) -m benchmarks.policy
	$(PY) -m benchmarks.train
	$(PY) -m benchmarks.serve
	$(PY) -m benchmarks.demo

bench-images: setup  ## image build times and sizes (root + buildah); reports/bench/images.json
	$(PY) -m benchmarks.images

images: setup  ## build the training and serving images (Docker if an engine runs, else buildah)
	$(PY) -m containers.build $(IMAGES_ARGS)

clean:  ## remove generated reports (not the venvs)
	rm -rf reports
