# Every target sets itself up: a fresh machine needs only python3 (3.11+).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CHROMIUM := $(VENV)/.chromium

.PHONY: install demo test unit integration typecheck bench bench-quick soak clean

$(STAMP): setup.py Makefile
	command -v java >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q openjdk-17-jre-headless; }  # PySpark (the spark extra)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,dev-broker,spark]'
	touch $(STAMP)

install: $(STAMP)

# Headless Chromium renders the web status page in tests/integration/test_web.py (Debian package).
$(CHROMIUM):
	command -v chromium >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q --no-install-recommends chromium; }
	mkdir -p $(VENV) && touch $(CHROMIUM)

demo: $(STAMP)
	$(PY) scripts/demo.py

test: $(STAMP) $(CHROMIUM)
	$(PY) -m mypy agentstream
	$(PY) -m pytest -q -p no:cacheprovider tests

unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

integration: $(STAMP) $(CHROMIUM)
	$(PY) -m pytest -q tests/integration

typecheck: $(STAMP)
	$(PY) -m mypy agentstream

bench: $(STAMP)
	$(PY) -m bench.run

bench-quick: $(STAMP)
	$(PY) -m bench.run --quick

# Soak (not part of `test`): 3 workers on the real broker, kill -9 / SIGTERM / broker pauses through
# the fault proxy for SOAK_SECONDS (600), 200k sentences; fails if any word is lost.
soak: $(STAMP)
	$(PY) -m tests.soak.soak

clean:
	rm -rf $(VENV) build *.egg-info artifacts
