# One entry point for people and CI alike. `make demo` and `make test` each set up what they need.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# Strict editable installs link each file, so a new module needs a reinstall: depend on them all.
SOURCES := $(shell find tablectl drivers simulators -name '*.py' 2>/dev/null)

.PHONY: demo test check lint typecheck bench bench-tables mosquitto deb clean

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
	$(BIN)/mypy tests bench packaging docs/diagrams

check: lint typecheck

test: check mosquitto
	$(BIN)/pytest

# The Debian package a table PC installs (README.md, "Installing on a table PC"): needs
# dpkg-deb and Debian's python3-venv; dependencies come from PyPI. Writes dist/tablectl_*.deb.
deb: $(STAMP)
	$(BIN)/python packaging/build_deb.py --out dist

bench: $(STAMP) mosquitto
	$(BIN)/python bench/lockout_window.py
	$(BIN)/python bench/lockout_latency.py
	cd bench && ../$(BIN)/python gpio_edges.py
	$(BIN)/python bench/evaluator.py
	$(BIN)/python bench/shoe_latency.py
	$(BIN)/python bench/mqtt_delivery.py

# Minutes: N table daemons as processes (N = 1, 10, 50, 100, 200) on one broker.
bench-tables: $(STAMP) mosquitto
	$(BIN)/python bench/mqtt_tables.py

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .pytest_cache .ruff_cache
