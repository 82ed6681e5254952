# One entry point for people and CI. `make demo` and `make test` work on a fresh clone.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
EMULATOR ?= ministack
export AWS_ENDPOINT_URL ?= http://127.0.0.1:4566
export AWS_DEFAULT_REGION ?= us-east-1
export AWS_ACCESS_KEY_ID ?= test
export AWS_SECRET_ACCESS_KEY ?= test
export EMULATOR
# Compiled modules (and pytest's rewritten tests) are cached in __pycache__ even where the environment asks Python
# not to write them: each test worker and CLI subprocess would otherwise compile the same sources again at every
# start. build.py leaves __pycache__ out of the zips.
unexport PYTHONDONTWRITEBYTECODE
DEV := $(BIN)/python -m leaderboard_dev
STAMP := $(VENV)/.installed

.PHONY: help check venv build release up down demo test test-unit test-acceptance test-model bench bench-smoke with-emulator lint fmt clean provider-schema provider-schema-package

help:
	@echo "make check     the fast loop: lint beside the unit tier without its slow runs, properties on fewer examples (no emulator, no build)"
	@echo "make demo      deploy the example to the emulator, load downloads, print the leaderboards"
	@echo "make test      unit tests, then the acceptance suite against the emulator (started and stopped here)"
	@echo "make test-model  the stream model at length: 20,000 histories (MODEL_HISTORIES), guard mutations, naive designs"
	@echo "make up|down   start the emulator (EMULATOR=ministack|localstack) / destroy the demo and stop the emulator, at AWS_ENDPOINT_URL only"
	@echo "make build     build dist/aggregator.zip and dist/query.zip reproducibly"
	@echo "make release VERSION=x.y.z  the version pyproject.toml and CHANGELOG.md give, from a clean tree: zips, the tools' wheel,"
	@echo "              SHA256SUMS and manifest.json into dist/release/x.y.z, and the annotated tag vx.y.z (never pushed)"
	@echo "make lint      ruff, terraform fmt -check and validate, checkov"
	@echo "make provider-schema  regenerate tests/unit/terraform/hashicorp-aws-6.json from the pinned hashicorp/aws 6.x package"
	@echo "make bench     ours against the guide's handler on the emulator: docs/benchmark.md (plots, summary), development/benchmark-results/ (raw)"
	@echo "make bench-smoke  the small variant (the test suite runs it): build/bench-smoke/"

# Two distributions, both editable: the operator tools (this folder: boto3, botocore and rich in ranges) and local
# development (development/: leaderboard_dev, its extras, and the exact versions CI and the tests run).
$(STAMP): pyproject.toml development/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip==25.3
	$(BIN)/python -m pip install --quiet -e . -e './development[emulator,dev,bench]'
	touch $(STAMP)

venv: $(STAMP)

build: $(STAMP)
	$(BIN)/python build.py

# What the stacks deploy, rebuilt only when a function's sources change (so two suites started together share one build).
LAMBDA_PACKAGES := dist/aggregator.zip dist/query.zip
$(LAMBDA_PACKAGES) &: build.py $(wildcard lambda_src/*/*.py lambda_src/*/requirements.txt) $(STAMP)
	$(BIN)/python build.py

# What a platform repository consumes: see the README, "Using the module from another stack", and docs/releasing.md.
release: $(STAMP)
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=x.y.z" >&2; exit 2; }
	$(DEV) release --version $(VERSION)

up: $(STAMP)
	$(DEV) up --emulator $(EMULATOR)

# The Terraform workspace of development/emulator_stack keeping the demo's state: another one (`make demo
# DEMO_WORKSPACE=mine`, then `make down` with the same) keeps a second demo, on another emulator, apart from this
# checkout's own. The resources are named as the README gives them (`demo-downloads`, `demo-query`) in any workspace:
# one demo per emulator.
DEMO_WORKSPACE ?= demo

down: $(STAMP)
	$(DEV) down --workspace $(DEMO_WORKSPACE)

demo: $(LAMBDA_PACKAGES) up
	$(DEV) demo --workspace $(DEMO_WORKSPACE)

# hashicorp/aws 6.x's published schema (development/provider-schema-requirements.txt): downloaded, never installed, into
# build/provider-schema/ (about 70 MB, once). The tests read the committed tests/unit/terraform/hashicorp-aws-6.json and,
# with the package here, prove that `make provider-schema` reproduces it.
PROVIDER_SCHEMA_PIN := development/provider-schema-requirements.txt
PROVIDER_SCHEMA_PACKAGE := build/provider-schema/.downloaded
$(PROVIDER_SCHEMA_PACKAGE): $(PROVIDER_SCHEMA_PIN) $(STAMP)
	$(BIN)/python -m pip download --quiet --no-deps --only-binary=:all: --require-hashes -r $(PROVIDER_SCHEMA_PIN) -d $(@D)
	touch $@

provider-schema-package: $(PROVIDER_SCHEMA_PACKAGE)

provider-schema: $(PROVIDER_SCHEMA_PACKAGE)
	$(DEV) provider-schema

# The AWS CLI (v1, as pip installs it) that docs/attaching.md's commands use and the acceptance suite runs: it pins its
# own botocore, so it gets a virtualenv of its own, put first on the acceptance suite's PATH.
# Defined before the targets that name it: a prerequisite's variable is expanded as its rule is read.
AWSCLI := .venv-awscli/bin/aws
$(AWSCLI):
	$(PYTHON) -m venv .venv-awscli
	.venv-awscli/bin/python -m pip install --quiet awscli==1.45.11

# Everything that needs no emulator: the unit tier, the benchmark's own tests, the embedded LocalStack executor's.
UNIT_TESTS := tests/unit tests/bench development/leaderboard_dev/emulators/localstack_runtime/process_executor/tests
# Two workers, a file each at a time (some files share a fixture folder or Terraform state among their tests), in
# collection order, which tests/unit/conftest.py makes longest first.
UNIT_WORKERS := -n 2 --dist loadfile --no-loadscope-reorder
# make check: six workers on two cores, since a third of the unit tier's time is waiting (a repair's fence is whole
# seconds of real time, the tools wait on threads reading the stream); four kept the two cores about two-thirds busy.
# The property tests draw a quarter of their examples.
CHECK_WORKERS := -n 6 --dist loadfile --no-loadscope-reorder
MODEL_HISTORIES ?= 1000
export MODEL_HISTORIES

# The fast loop for whoever changes the code: lint beside the unit tier on six workers, leaving out the runs marked
# slow (the stream model and the property searches at length: `make test-unit` and CI run them). Needs only the venv:
# the tests that read a zip build their own, and the provider-schema check skips without its package. Lint's output
# follows the tests'; either failing fails the check. Checkov's own virtualenv, on a fresh clone, installs in lint's
# background job, beside the tests.
check: $(STAMP)
	@mkdir -p build; \
	$(MAKE) --no-print-directory lint > build/check-lint.log 2>&1 & lint=$$!; \
	trap 'kill $$lint 2>/dev/null' INT TERM; \
	PROPERTY_EXAMPLES=quick $(BIN)/python -m pytest $(CHECK_WORKERS) -q -m "not slow" $(UNIT_TESTS); tests=$$?; \
	wait $$lint; lint_status=$$?; \
	echo "== lint (build/check-lint.log)"; cat build/check-lint.log; \
	echo "== make check: lint exit $$lint_status, unit tier exit $$tests"; \
	[ $$lint_status -eq 0 ] && [ $$tests -eq 0 ]

test-unit: $(STAMP) $(PROVIDER_SCHEMA_PACKAGE)
	$(BIN)/python -m pytest $(UNIT_WORKERS) $(UNIT_TESTS)

# The stream model at length: 20,000 histories of the shipped aggregator in 8 chunks over two workers,
# and a longer search for each guard's breaking history.
test-model: MODEL_HISTORIES = 20000
test-model: $(STAMP)
	MODEL_CHUNKS=4 MODEL_GUARD_HISTORIES=2000 $(BIN)/python -m pytest -q -n 2 --dist load --durations=10 \
		tests/unit/stream_model/test_exactly_once.py tests/unit/stream_model/test_guard_mutations.py tests/unit/stream_model/test_naive_designs.py

# The README's test command: the acceptance suite against the emulator and, beside it at a lower priority, the unit
# tier. The acceptance suite mostly waits (on the emulator, on Terraform, on stream delivery: under one core of CPU on
# two) and its waits are bounded, so it gets the CPU first; the unit tier computes and takes what is left.
# ACCEPTANCE_EMULATORS runs the suite against each emulator at once (CI: "ministack localstack"), each on a port of
# its own (AWS_ENDPOINT_URL's, then the next ones) on SUITES_WORKERS, its output in build/acceptance-<emulator>.log
# and printed when all are done; the unit tier runs once beside them all, its report last (build/test-unit.log).
# Stops each emulator only if this run started it.
ACCEPTANCE_EMULATORS ?= $(EMULATOR)
# Four workers for the unit tier beside the acceptance suite: its waits (a repair's fence is whole seconds of real
# time) then overlap. At its lower priority it gets little CPU until the acceptance suites end, and then runs alone:
# three workers kept the two cores only three-quarters busy in that tail.
BESIDE_WORKERS := -n 4 --dist loadfile --no-loadscope-reorder
# Three workers per suite when several run at once (four for one alone, PYTEST_WORKERS).
SUITES_WORKERS := -n 3 --dist loadfile --no-loadscope-reorder
test: $(LAMBDA_PACKAGES) $(STAMP) $(PROVIDER_SCHEMA_PACKAGE) $(AWSCLI)
	@mkdir -p build; \
	nice -n 10 $(BIN)/python -m pytest $(BESIDE_WORKERS) --durations=10 $(UNIT_TESTS) > build/test-unit.log 2>&1 & unit=$$!; \
	suites=""; trap 'kill $$unit $$suites 2>/dev/null' INT TERM; \
	echo "the unit tier runs beside the acceptance suite: build/test-unit.log"; \
	set -- $(ACCEPTANCE_EMULATORS); \
	if [ $$# -eq 1 ]; then \
		echo "== the acceptance suite on $$1"; \
		$(MAKE) --no-print-directory with-emulator EMULATOR=$$1 PYTEST_PATHS="tests/acceptance"; acceptance=$$?; \
	else \
		endpoint=$${AWS_ENDPOINT_URL:-http://127.0.0.1:4566}; host=$${endpoint%:*}; port=$${endpoint##*:}; port=$${port%/}; \
		for emulator in "$$@"; do \
			echo "== the acceptance suite on $$emulator at $$host:$$port, beside the others: build/acceptance-$$emulator.log"; \
			AWS_ENDPOINT_URL=$$host:$$port $(MAKE) --no-print-directory with-emulator EMULATOR=$$emulator \
				PYTEST_PATHS="tests/acceptance" PYTEST_WORKERS="$(SUITES_WORKERS)" > build/acceptance-$$emulator.log 2>&1 & \
			suites="$$suites $$!"; port=$$((port + 1)); \
		done; \
		acceptance=0; failed=""; set -- $$suites; \
		for emulator in $(ACCEPTANCE_EMULATORS); do \
			wait $$1 || { acceptance=1; failed="$$failed $$emulator"; }; shift; \
			echo "== the acceptance suite on $$emulator (build/acceptance-$$emulator.log)"; cat build/acceptance-$$emulator.log; \
		done; \
		[ -z "$$failed" ] || echo "== the acceptance suite failed on:$$failed"; \
	fi; \
	wait $$unit; unit_status=$$?; \
	echo "== the unit tier (build/test-unit.log)"; cat build/test-unit.log; \
	echo "== acceptance ($(ACCEPTANCE_EMULATORS)): exit $$acceptance; unit tier: exit $$unit_status"; \
	[ $$acceptance -eq 0 ] && [ $$unit_status -eq 0 ]

# The acceptance suite alone, on the emulator EMULATOR names (CI runs the unit tier once).
test-acceptance: $(LAMBDA_PACKAGES) $(STAMP)
	@$(MAKE) --no-print-directory with-emulator PYTEST_PATHS="tests/acceptance"

# Four workers on two cores, a test file each at a time: the suite waits on the emulator and on Terraform far more than
# it computes (with three workers, MiniStack and the tests together used under half of the two cores).
# Files in collection order, which tests/acceptance/conftest.py makes longest first (xdist would order them by count).
PYTEST_WORKERS ?= -n 4 --dist loadfile --no-loadscope-reorder

with-emulator: $(AWSCLI)
	@started=$$($(DEV) up --emulator $(EMULATOR)) || exit 1; echo "$$started"; \
	PATH="$(CURDIR)/.venv-awscli/bin:$$PATH" $(BIN)/python -m pytest $(PYTEST_WORKERS) --durations=20 $(PYTEST_PATHS); status=$$?; \
	case "$$started" in *started*) $(DEV) down >/dev/null ;; esac; exit $$status

# The benchmark on the emulator EMULATOR names (started here and stopped afterwards if it was not running).
# The full run takes about half an hour on two cores; BENCH_ARGS picks a part (side-by-side, boards, handler-cpu, reads, index-layout, report).
BENCH_ARGS ?=
bench: $(LAMBDA_PACKAGES) $(STAMP)
	@started=$$($(DEV) up --emulator $(EMULATOR)) || exit 1; echo "$$started"; \
	$(BIN)/python -m leaderboard_dev.bench $(BENCH_ARGS); status=$$?; \
	case "$$started" in *started*) $(DEV) down >/dev/null ;; esac; exit $$status

bench-smoke: $(LAMBDA_PACKAGES) $(STAMP)
	@$(MAKE) --no-print-directory bench BENCH_ARGS="--smoke $(BENCH_ARGS)"

# checkov pins its own dependency tree, so it gets a virtualenv of its own.
CHECKOV := .venv-checkov/bin/checkov
$(CHECKOV):
	$(PYTHON) -m venv .venv-checkov
	.venv-checkov/bin/python -m pip install --quiet checkov==3.3.30

lint: $(STAMP) $(CHECKOV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(DEV) check-terraform --checkov $(CHECKOV)

fmt: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .
	terraform fmt -recursive terraform

clean:
	rm -rf dist build .pytest_cache .ruff_cache
