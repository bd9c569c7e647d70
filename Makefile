# Two commands for a fresh machine:
#   make demo   — install wattio and run the embedded default (`wattio demo`)
#   make test   — install everything the tests need and run every test
# Both create a virtualenv in .venv and build the Rust core in release mode into it.

VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.wattio-installed
SOURCES := $(shell find crates python catalogue -type f \( -name '*.rs' -o -name '*.py' -o -name '*.toml' \) -not -path '*/fuzz/*' 2>/dev/null) Cargo.toml pyproject.toml

.PHONY: demo test install rust-test lint py-test fuzz bench workloads clean

demo: install
	$(VENV)/bin/wattio demo

install: $(STAMP)

$(STAMP): $(SOURCES)
	@command -v cargo >/dev/null || { echo "wattio needs a Rust toolchain (cargo): https://rustup.rs"; exit 1; }
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip 'maturin>=1.7,<2'
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release --extras test -q
	touch $(STAMP)

# Each stage reports its wall time (scripts/timed.sh): CI's budget is 30 minutes.
test:
	bash scripts/timed.sh install $(MAKE) install
	bash scripts/timed.sh apt bash scripts/install-apt.sh
	bash scripts/timed.sh lint $(MAKE) lint
	bash scripts/timed.sh rust-test $(MAKE) rust-test
	bash scripts/timed.sh py-test $(MAKE) py-test
	bash scripts/timed.sh fuzz $(MAKE) fuzz

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -q -- -D warnings
	python3 scripts/check_shared_features.py
	$(VENV)/bin/ruff check python tests examples bench scripts

rust-test:
	python3 scripts/rust_test.py

# Bounded cargo-fuzz run of the fuzz targets from their committed corpora (nightly).
fuzz:
	bash scripts/fuzz-ci.sh

# A test file's tests run in one worker (`--dist loadfile`: its module fixtures are built
# once); the two longest files (the quick reproduction and the side-by-side peers' build)
# then run at once on CI's two cores.
py-test:
	$(VENV)/bin/pytest -q -n auto --maxprocesses 4 --dist loadfile --durations=8

bench: install
	$(PY) bench/run.py

# Re-capture the workload library (root; minutes each; not part of `make test`).
workloads: install
	for r in workloads/*/run.sh; do bash "$$r" || exit 1; done

clean:
	rm -rf $(VENV) target wattio-out
