# The two commands of the setup contract: `make demo` and `make test`.
# Both create .venv when missing, install the project with its extras (a stamp file keeps a second run
# quick), and install the Debian packages the suite needs when they are missing.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.eoslog-installed
APT_PACKAGES := kcat zookeeper chromium chromium-driver
# Debian packages only the tests use (postgresql: the check-back PostgreSQL tests' throw-away server,
# eoslog/testing/postgres.py; nftables: the verifier's network partitions, eoslog/faults/netns.py; fuse3:
# libfuse3 and fusermount3 for LazyFS, the power-loss disk, eoslog/faults/lazyfs.py):
# `make test` installs them too, `make demo` never needs them.
TEST_APT_PACKAGES := postgresql nftables fuse3
PYTEST_ARGS ?=
# The suite runs in two pytest-xdist workers: most of its time is spent waiting (fault runs of fixed length,
# brokers and JVMs starting, deadlines), so two workers on a 2-core machine take ~20 min instead of ~34
# (docs/benchmarks.md, "The suite in two workers"). `make test PYTEST_WORKERS=0` runs it in one process.
PYTEST_WORKERS ?= 2
XDIST := $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist worksteal)

.PHONY: demo test test-fast bench system-packages test-system-packages clean

demo: $(STAMP) system-packages
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
	$(PY) -m pip install --quiet -e '.[test,spark,dev,bench,console]'
	touch $(STAMP)

# Installs only what is missing; `apt-get update` runs once, and only when something is missing.
# test-system-packages: APT_PACKAGES and TEST_APT_PACKAGES.
system-packages test-system-packages:
	@missing=""; for p in $(APT_PACKAGES) $(if $(filter test-%,$@),$(TEST_APT_PACKAGES)); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

clean:
	rm -rf $(VENV) build src/*.egg-info
