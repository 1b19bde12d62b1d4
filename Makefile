# IOStack: the two commands are `make run` (all-in-one stack) and `make test` (whole suite).
# Both install what is missing first; both are safe to run again.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STATE_DIR ?= $(CURDIR)/.iostack
INSTALLED := $(VENV)/.installed
NATIVE_DIRS := $(wildcard iostack/*/native)

export IOSTACK_STATE_DIR := $(STATE_DIR)

.PHONY: setup native assets swift-tests keystone run stop status test unit integration \
	conformance lint bench clean

setup: $(INSTALLED) native assets swift-tests

# apt packages, then the virtualenv with the project installed editable.
$(INSTALLED): pyproject.toml deploy/apt-packages.txt deploy/bootstrap.sh
	deploy/bootstrap.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,spark,docker]'
	touch $@

# Native parts (C libraries, plugins) each build with their own Makefile.
native: $(INSTALLED)
	@for d in $(NATIVE_DIRS); do $(MAKE) -s -C $$d || exit 1; done

# The admin console's browser libraries, vendored from the npm registry (no CDN at run time).
assets: $(INSTALLED)
	deploy/ui-assets.sh

# Swift's functional tests, from the source distribution of the installed Swift version
# (once per version, into build/swift-tests/); tests/integration/conformance runs them.
swift-tests: $(INSTALLED)
	$(PY) tests/integration/conformance/swift_suite.py --fetch

# Keystone in its own virtualenv under the state dir (--auth keystone; the Keystone tests).
keystone: $(INSTALLED)
	$(VENV)/bin/iostack aio install-keystone --state-dir $(STATE_DIR)

run: setup
	$(VENV)/bin/iostack aio start --state-dir $(STATE_DIR)

stop:
	@if [ -x $(VENV)/bin/iostack ]; then $(VENV)/bin/iostack aio stop --state-dir $(STATE_DIR); \
	else echo "nothing to stop (no virtualenv yet)"; fi

status:
	@if [ -x $(VENV)/bin/iostack ]; then $(VENV)/bin/iostack aio status --state-dir $(STATE_DIR); \
	else echo "not set up yet: run 'make run'"; fi

test: setup keystone
	$(PY) -m pytest tests

unit: setup
	$(PY) -m pytest tests -m "not integration"

integration: setup keystone
	$(PY) -m pytest tests -m integration

# Swift's whole functional and s3api suites through IOStack (no policy, compression,
# encryption), what fails re-run on plain Swift; `make test` runs them too.
conformance: setup
	$(PY) tests/integration/conformance/swift_suite.py

lint: setup
	$(VENV)/bin/ruff check iostack tests bench

bench: setup
	$(PY) bench/swift_baseline.py

clean: stop
	rm -rf $(VENV) $(STATE_DIR)
	@for d in $(NATIVE_DIRS); do $(MAKE) -s -C $$d clean; done
