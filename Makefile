# Content-based pub/sub matching on Spark Structured Streaming.
# `make help` lists the targets.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
WARM := var/.numba-warm
JARS := $(VENV)/jars/.resolved
PYTEST_ARGS ?=
# peer binaries for scripts.bench.dense, e.g. --peer-for 1000000:hem5-be7=PATH:7 (docs/bitmark.md)
DENSE_PEERS ?=
# the Quamina benchmark binary for scripts.bench.quamina (docs/rules-bench.md); skipped when empty
QUAMINA ?=
# the interpreter of a venv with apache-flink for scripts.bench.flink (docs/cayuga.md); skipped when empty
FLINK ?=

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*?## "} /^[a-zA-Z_-]+:.*?## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Python 3.11 or newer is required ($(PYTHON) is $$($(PYTHON) --version))"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

$(JARS): $(STAMP) $(wildcard conf/maven/*.xml)
	@command -v mvn >/dev/null 2>&1 || { echo "Maven (mvn) is missing: it resolves the Java jars (Kafka's broker, Spark's Kafka connector, hadoop-aws) once (Debian: apt-get install maven)"; exit 1; }
	$(PY) -m streaming.jars resolve
	@touch $@

$(WARM): $(STAMP) $(shell find matchers -name '*.py') streaming/notes_kernel.py
	$(PY) -m matchers warm
	$(PY) -c "from streaming import notes_kernel; notes_kernel.warm()"
	@mkdir -p $(@D) && touch $@

.PHONY: setup
setup: $(STAMP) check-java $(JARS) $(WARM) ## Create the virtual environment, install everything (Python packages, Java jars from Maven), compile the numba kernels
	@echo "ready: $(VENV) ($$($(PY) --version))"

.PHONY: check-java
check-java: ## Check that Java (17 or newer, needed by Spark) is on the machine
	@command -v java >/dev/null 2>&1 || { echo "Java is missing: Spark needs a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless), or set JAVA_HOME"; exit 1; }
	@java -version 2>&1 | head -1

.PHONY: run
run: run-stream ## Same as run-stream

.PHONY: run-stream
run-stream: setup ## Run the service on its embedded defaults (embedded broker, conf/pubsub.toml)
	$(PY) -m streaming run $(ARGS)

.PHONY: demo
demo: setup ## Match a generated stock-ticker workload with the command-line matcher
	@mkdir -p var/demo
	$(PY) -m scripts.workloads stock --subs var/demo/subs.jsonl --events var/demo/events.jsonl --n-subs 10000 --n-events 20000 --seed 1
	$(PY) -m matchers match --subscriptions var/demo/subs.jsonl --events var/demo/events.jsonl --matcher counting --out var/demo/matches.jsonl
	@head -3 var/demo/matches.jsonl

.PHONY: test
test: setup ## Run every test (unit and differential on both cores, then integration with Spark and the embedded broker)
	@# pytest's exit status 5 is "no test selected" (PYTEST_ARGS naming tests of one kind only)
	$(PY) -m pytest -q -n 2 -m "not integration" --durations=10 $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(PY) -m pytest -q -m integration --durations=20 $(PYTEST_ARGS) || [ $$? -eq 5 ]

.PHONY: test-unit
test-unit: setup ## Run the tests that need neither Spark nor the broker
	$(PY) -m pytest -q -n 2 -m "not integration" $(PYTEST_ARGS)

.PHONY: bench
bench: setup ## Run every benchmark at paper sizes (hours; results in docs/): the suite of scripts/bench/suite.py
	$(PY) -m scripts.bench --all --with 'dense=$(DENSE_PEERS)' --with 'quamina=$(if $(QUAMINA),--quamina $(QUAMINA))' \
		--with 'flink=$(if $(FLINK),--flink-python $(FLINK))'

.PHONY: bench-quick
bench-quick: setup ## Run every benchmark in its quick mode (minutes)
	$(PY) -m scripts.bench --all --quick

.PHONY: lint
lint: $(STAMP) ## Lint (ruff), type-check (mypy), every type: ignore with its reason; needs only the venv
	$(VENV)/bin/ruff check matchers streaming scripts tests
	$(VENV)/bin/mypy matchers streaming scripts tests
	@! grep -rnE --include='*.py' '# type: ignore(\[[^]]*\])? *$$' matchers streaming scripts tests \
		|| { echo 'a "# type: ignore[code]" needs its reason on the line ("# type: ignore[code]  # why")'; exit 1; }

.PHONY: clean
clean: ## Remove caches, checkpoints, the embedded broker's topics and logs (var/; keeps the virtual environment)
	rm -rf var .pytest_cache .hypothesis .mypy_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

.PHONY: distclean
distclean: clean ## Also remove the virtual environment
	rm -rf $(VENV)
