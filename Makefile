# One entry point for people and CI alike. `make demo` and `make test` each set up what they need.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# Strict editable installs link each file, so a new module needs a reinstall: depend on them all.
SOURCES := $(shell find tablectl drivers simulators -name '*.py' -o -name '*.sql' 2>/dev/null)

.PHONY: demo test check lint typecheck imports bench bench-tables bench-link bench-failover \
	bench-soak mosquitto postgresql patroni chromium debian-tools deb docs test-install clean

$(STAMP): pyproject.toml $(SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# strict editable mode: the installed view (tablectl.drivers -> drivers/) is what mypy and tests see
	$(BIN)/pip install --quiet -e '.[test]' --config-settings editable_mode=strict
	touch $(STAMP)

# A private broker per run needs Debian's mosquitto binary (not a running service).
mosquitto:
	@if command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's mosquitto package"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q mosquitto; \
	else \
		echo "tablectl's demo and tests need Mosquitto: run 'sudo apt-get install mosquitto'" >&2; \
		exit 1; \
	fi

# The link controller's tests run a private PostgreSQL from Debian's server binaries
# (initdb, pg_ctl under /usr/lib/postgresql/<ver>/bin), not a running service.
postgresql:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's postgresql package"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql; \
	else \
		echo "the link controller's tests need PostgreSQL: run 'sudo apt-get install postgresql'" >&2; \
		exit 1; \
	fi

# The replicated ledger's tests (tests/test_link_failover.py) run a private cluster from Debian's
# patroni and etcd-server (three etcd members, three PostgreSQL nodes), not running services:
# the packages' units stay off (no /etc/patroni/config.yml; etcd is not started here).
patroni: postgresql
	@if command -v patroni >/dev/null 2>&1 && command -v etcd >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's patroni and etcd-server packages"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q patroni etcd-server; \
	else \
		echo "the failover tests need Patroni and etcd: run 'sudo apt-get install patroni etcd-server' (skipped without them)" >&2; \
	fi

# The meter sign is tested in Debian's headless Chromium (tests/test_link_sign.py).
chromium:
	@if command -v chromium >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's chromium package"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
	else \
		echo "the meter sign's test needs Chromium: run 'sudo apt-get install chromium' (skipped without it)" >&2; \
	fi

# What the package tests need from Debian (tests/test_deb.py, tests/test_cli_docs.py): lintian
# judges the package, dpkg-dev's dpkg-shlibdeps and binutils' strip build it, graphviz draws
# docs/architecture.svg, groff checks the man page; Pillow is compiled for the package
# against Debian's zlib and libjpeg (their -dev packages and the Python headers); libpq5 is
# the PostgreSQL client library psycopg loads. Installed as mosquitto is.
DEBIAN_TOOLS := lintian dpkg-dev binutils graphviz groff-base python3-dev \
	zlib1g-dev libjpeg62-turbo-dev libpq5
debian-tools:
	@missing=""; for pkg in $(DEBIAN_TOOLS); do \
		dpkg-query -W -f='$${Status}' $$pkg 2>/dev/null | grep -q "ok installed" || missing="$$missing $$pkg"; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's$$missing"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	else \
		echo "the package tests skip without$$missing: run 'sudo apt-get install$$missing'" >&2; \
	fi

demo: $(STAMP) mosquitto
	$(BIN)/tablectl demo $(DEMO_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy runs inside the editable install's link tree, where tablectl/drivers and
# tablectl/simulators exist as the installed package has them; from the repository root it
# would treat them as site-packages and stay silent about their errors.
typecheck: $(STAMP)
	cd build/__editable__.tablectl-*/ && ../../$(BIN)/mypy --config-file ../../pyproject.toml -p tablectl
	$(BIN)/mypy tests bench packaging docs/diagrams tools
	$(BIN)/mypy -p tablectl_asciishuffler

# The layers (docs/design.md, "Layers") as import-linter contracts (.importlinter), from the
# root as anyone types it: tablectl/drivers and tablectl/simulators are links to the top-level
# folders, so the root's tablectl/ is the installed view; tools/ holds our contract type.
imports: $(STAMP)
	$(BIN)/lint-imports
	# the example driver package sees only tablectl's public driver API
	cd examples/tablectl-asciishuffler && PYTHONPATH=src ../../$(BIN)/lint-imports

check: lint typecheck imports

test: check mosquitto postgresql patroni chromium debian-tools
	$(BIN)/pytest

# The README's install steps in a fresh Debian 12 root (debootstrap; minutes, as root):
# tests/test_install.py. The root is cached in build/ between runs.
test-install: $(STAMP) debian-tools
	@command -v debootstrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap; }
	$(BIN)/pytest -m install tests/test_install.py

# The generated parts of the docs: the README's role table (from the argparse definitions)
# and docs/architecture.svg, docs/layers.svg (from their .dot). Tests fail when they drift.
docs: $(STAMP)
	$(BIN)/python packaging/cli_docs.py --readme README.md
	dot -Tsvg docs/architecture.dot -o docs/architecture.svg
	dot -Tsvg docs/layers.dot -o docs/layers.svg

# The Debian package a table PC installs (README.md, "Installing on a table PC"): needs
# dpkg-deb and Debian's python3-venv; dependencies come from PyPI. Writes dist/tablectl_*.deb.
deb: $(STAMP)
	$(BIN)/python packaging/build_deb.py --out dist

bench: $(STAMP) mosquitto
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/lockout_window.py
	$(BIN)/python bench/lockout_latency.py
	cd bench && ../$(BIN)/python gpio_edges.py
	$(BIN)/python bench/evaluator.py
	$(BIN)/python bench/shoe_latency.py
	$(BIN)/python bench/mqtt_delivery.py
	$(BIN)/python bench/journal_mark.py
	$(BIN)/python bench/records_export.py

# Hours: one daemon per game plays 21,000 rounds in compressed time: its memory, the journal's
# growth, game pace's cost (bench/soak.py; `--quick` for minutes).
bench-soak: $(STAMP) mosquitto
	$(BIN)/python bench/soak.py

# Minutes: N table daemons as processes (N = 1, 10, 50, 100, 200) on one broker.
bench-tables: $(STAMP) mosquitto
	$(BIN)/python bench/mqtt_tables.py

# Minutes: a floor of 50, 200 and 500 light tables against link controllers and PostgreSQL.
bench-link: $(STAMP) mosquitto postgresql
	$(BIN)/python bench/link_floor.py

# Minutes: failovers of the replicated ledger, each kind ten times, under a floor's load.
bench-failover: $(STAMP) mosquitto patroni
	$(BIN)/python bench/link_failover.py

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .pytest_cache .ruff_cache
