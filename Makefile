# The two commands of the setup contract: `make demo` and `make test`.
# Both create .venv when missing, install the project (a stamp file keeps a second run quick) and the
# Debian packages they need when those are missing. `make demo` installs only what the demo runs: the
# project with its spark extra and a Java runtime for Spark. `make test` installs every extra and the
# Debian packages of the whole suite.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.eoslog-installed
DEMO_STAMP := $(VENV)/.eoslog-demo-installed
# `eoslog pipeline` on an embedded broker: Spark's JVM and nothing else from Debian.
DEMO_APT_PACKAGES := default-jre-headless
# The suite's: kcat and ZooKeeper for the interop and cluster tests, chromium and its driver for the web
# console's browser tests, postgresql for the check-back PostgreSQL tests' throw-away server
# (eoslog/testing/postgres.py), nftables for the verifier's network partitions (eoslog/faults/netns.py),
# fuse3 (libfuse3 and fusermount3) for LazyFS, the power-loss disk (eoslog/faults/lazyfs.py), curl for
# docs/console.md's shell examples (tests/docs/test_docs_console.py).
# `make demo` needs none of them.
TEST_APT_PACKAGES := $(DEMO_APT_PACKAGES) kcat zookeeper chromium chromium-driver postgresql nftables fuse3 curl
PYTEST_ARGS ?=
# The suite runs in two pytest-xdist workers: most of its time is spent waiting (fault runs of fixed length,
# brokers and JVMs starting, deadlines), so two workers on a 2-core machine take ~20 min instead of ~34
# (docs/benchmarks.md, "The suite in two workers"). `make test PYTEST_WORKERS=0` runs it in one process.
PYTEST_WORKERS ?= 2
XDIST := $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist worksteal)

.PHONY: demo test test-fast bench demo-system-packages test-system-packages clean

demo: $(DEMO_STAMP) demo-system-packages
	$(PY) -m eoslog pipeline

test: $(STAMP) test-system-packages
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest $(XDIST) -m "not slow and not interop" $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) bench/log_bench.py

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): $(VENV)/bin/python pyproject.toml
	$(PY) -m pip install --quiet -e '.[test,spark,dev,bench,console,verify,schema-registry]'
	touch $(STAMP) $(DEMO_STAMP)

# Everything `make test` installs includes the demo's; a venv made by `make test` is ready for the demo.
$(DEMO_STAMP): $(VENV)/bin/python pyproject.toml
	$(PY) -m pip install --quiet -e '.[spark]'
	touch $(DEMO_STAMP)

# Installs only what is missing; `apt-get update` runs once, and only when something is missing.
demo-system-packages test-system-packages:
	@missing=""; for p in $(if $(filter test-%,$@),$(TEST_APT_PACKAGES),$(DEMO_APT_PACKAGES)); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

clean:
	rm -rf $(VENV) build src/*.egg-info
