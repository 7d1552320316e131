# Every target sets itself up: a fresh machine needs only python3 (3.11+).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.demo-installed
CHROMIUM := $(VENV)/.chromium
FAUST_VENV := $(VENV)/faust-takeover/bin/python
# The integration tests mostly wait (group joins, session timeouts, restores, Spark's JVM): three
# pytest-xdist workers, each with its own dev broker (the Kafka cluster is shared), on 2 cores: 600 s
# with two, 521 s with three on an idle machine (2026-12-07). worksteal evens out the long tests.
# INTEGRATION_PAR= runs them in one process.
INTEGRATION_PAR ?= -n 3 --dist worksteal

# One recipe at a time: several of them install into the same venv (make -j would race on it).
.NOTPARALLEL:

.PHONY: kafka kafka-jars faust-settings-doc faust-venv install compile demo test lint format docs docs-serve unit unit-pure integration typecheck bench bench-quick bench-micro soak soak-scale clean

# The full install: everything `make test` runs (test, dev broker, Spark with Java 17, docs).
$(STAMP): setup.py Makefile
	@echo "== installing agentstream with the test, dev-broker, spark and docs extras into $(VENV) (pip shows its progress)"
	command -v java >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q openjdk-17-jre-headless; }  # PySpark (the spark extra)
	command -v mvn >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q maven; }  # Apache Kafka for the tests (tests/kafka_cluster/pom.xml)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --progress-bar on --upgrade pip
	AGENTSTREAM_COMPILE=0 $(PY) -m pip install --progress-bar on -e '.[test,dev-broker,spark,docs]'
	touch $(STAMP) $(DEMO_STAMP)

# What the demo runs: the runtime and the dev broker (no test tools, no Spark, no Java).
$(DEMO_STAMP): setup.py
	@echo "== installing agentstream and the dev broker into $(VENV) for the demo (pip shows its progress)"
	$(PYTHON) -m venv $(VENV)
	AGENTSTREAM_COMPILE=0 $(PY) -m pip install --progress-bar on -e '.[dev-broker]'
	touch $(DEMO_STAMP)

# The hot path compiled with mypyc, in place (setup.py COMPILED lists the modules): rebuilt when
# any package source changes (compiled code depends on the types of what it imports). Until it
# is, agentstream/compiled.py runs every compiled module as pure Python, with a warning.
HOT := $(shell sed -n 's/^    "\(agentstream\/.*\.py\)",$$/\1/p' setup.py)
SOURCES := $(shell find agentstream -name '*.py' ! -name '.*' -type f)
COMPILED := agentstream/_compiled.json
$(COMPILED): $(DEMO_STAMP) setup.py $(SOURCES)
	@echo "== compiling the hot path with mypyc: $(HOT)"
	$(PY) -c "import mypyc, setuptools, wheel" 2>/dev/null || $(PY) -m pip install --progress-bar on 'mypy>=2.4,<3' setuptools wheel
	find agentstream -name '*.so' -delete  # a module taken off the list must not keep its old build
	rm -f agentstream__mypyc.*  # where builds before the shared library moved into the package put it
	AGENTSTREAM_COMPILE=require $(PY) setup.py -q build_ext --inplace

install: $(STAMP) $(COMPILED)

compile: $(COMPILED)

# Apache Kafka's broker jars from Maven Central (a test dependency only), resolved once per pom into Maven's
# cache; the tests and `make kafka` run kafka.Kafka from the classpath this prints.
KAFKA_JARS := $(VENV)/.kafka-jars
$(KAFKA_JARS): $(STAMP) tests/kafka_cluster/pom.xml
	$(PY) -c "from tests.kafka_cluster.cluster import classpath; classpath()" || echo "== no Kafka jars: the Kafka cluster tests will skip and say why"
	touch $(KAFKA_JARS)

kafka-jars: $(KAFKA_JARS)

# A 3-broker Kafka cluster (KRaft) on loopback until Ctrl-C; prints its bootstrap list and listeners.
kafka: $(KAFKA_JARS)
	$(PY) -m tests.kafka_cluster $(KAFKA_ARGS)

# Headless Chromium renders the web status page in tests/integration/test_web.py (Debian package).
$(CHROMIUM):
	command -v chromium >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q --no-install-recommends chromium; }
	mkdir -p $(VENV) && touch $(CHROMIUM)

# faust-streaming in a virtualenv of its own, for tests/integration/test_faust_takeover.py only
# (the test builds it too when missing, and skips saying why only if it cannot be installed).
$(FAUST_VENV): $(STAMP)
	$(PY) -m tests.faust_takeover.faust_env || echo "== no faust-streaming virtualenv: test_faust_takeover.py will skip and say why"

faust-venv: $(FAUST_VENV)

# `make demo` runs until Ctrl-C; `make demo DEMO_ARGS=--once` stops after the queries.
demo: $(DEMO_STAMP) $(COMPILED)
	@$(PY) scripts/demo.py $(DEMO_ARGS)

test: $(STAMP) $(COMPILED) $(CHROMIUM) $(FAUST_VENV) $(KAFKA_JARS)
	$(VENV)/bin/ruff check .  # lint (pyproject.toml [tool.ruff])
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy agentstream
	$(VENV)/bin/lint-imports  # the layers contract in pyproject.toml
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet --site-dir build/site
	$(PY) scripts/unit_builds.py  # the unit suite on the compiled and the pure build, side by side
	$(PY) -m pytest -q -p no:cacheprovider $(INTEGRATION_PAR) --durations=15 tests --ignore=tests/unit  # integration: the real broker (the 15 slowest listed)

# docs/faust-settings.md: the table of every Faust setting (agentstream/faust_settings.py), rendered.
faust-settings-doc: $(STAMP)
	$(PY) -c "from agentstream import faust_arguments as a, faust_settings as s; print(s.render_markdown() + a.render_markdown(), end='')" > docs/faust-settings.md

# The documentation site (mkdocs-material): build/site/index.html; `make docs-serve` for a live preview.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir build/site

docs-serve: $(STAMP)
	$(PY) -m mkdocs serve

unit: $(STAMP) $(COMPILED)
	$(PY) -m pytest -q tests/unit

# The unit tests on the pure-Python source of the compiled modules (what runs where mypyc cannot).
unit-pure: $(STAMP)
	AGENTSTREAM_PURE=1 $(PY) -m pytest -q -p no:cacheprovider tests/unit

integration: $(STAMP) $(COMPILED) $(CHROMIUM) $(FAUST_VENV) $(KAFKA_JARS)
	$(PY) -m pytest -q $(INTEGRATION_PAR) tests/integration

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

# Fix what ruff can and format the tree.
format: $(STAMP)
	$(VENV)/bin/ruff check --fix . && $(VENV)/bin/ruff format .

typecheck: $(STAMP)
	$(PY) -m mypy agentstream

bench: $(STAMP) $(COMPILED)
	$(PY) -m bench.run

bench-quick: $(STAMP) $(COMPILED)
	$(PY) -m bench.run --quick

# Per-record cost of the word count's stream, send and table steps against hand-written ones (no broker).
bench-micro: $(STAMP) $(COMPILED)
	$(PY) -m bench.micro

# Soak (not part of `test`): 3 workers on the real broker, kill -9 / SIGTERM / broker pauses through
# the fault proxy for SOAK_SECONDS (600), 200k sentences; fails if any word is lost.
soak: $(STAMP) $(COMPILED)
	$(PY) -m tests.soak.soak

# Scale-out must-show (issue 30, not part of `test`): 1.6M keys, a second worker joins under 200 records/s,
# then a rolling restart of 3 workers; reports the longest output gap per partition, lost, duplicates.
soak-scale: $(STAMP) $(COMPILED)
	$(PY) -m tests.soak.scale_out

clean:
	rm -rf $(VENV) build *.egg-info artifacts $(COMPILED) agentstream__mypyc.*
	find agentstream -name '*.so' -delete
