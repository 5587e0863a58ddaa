# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CHROMIUM := /usr/bin/chromium
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)

.PHONY: demo test build chromium bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

# The front-end bundle (src/attnwidget/static/), rebuilt every time: esbuild takes well under a second.
build: node_modules/.package-lock.json
	npm run build

$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[demo]"
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[test]"
	touch $@

demo: build $(VENV)/.demo-installed
	$(BIN)/jupyter lab $(ROOT_FLAG) --ServerApp.root_dir=notebooks --LabApp.default_url=/lab/tree/01_attention_lab.ipynb

# Browser tests drive Debian's Chromium; install it when it is missing and we may.
chromium:
	@test -x $(CHROMIUM) || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	  else echo "Browser tests need Chromium at $(CHROMIUM): run 'sudo apt-get install chromium'." >&2; exit 1; fi; }

test: build $(VENV)/.test-installed chromium
	npm test
	$(BIN)/python -m pytest

# Speed, size and memory (benchmarks/README.md), then the same attention in bertviz and CircuitsVis.
bench: build $(VENV)/.test-installed
	npm ci --no-audit --no-fund --prefix benchmarks
	$(BIN)/pip install -q -e ".[bench]"
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/side_by_side.py

clean:
	rm -rf $(VENV) node_modules src/attnwidget/static dist tests/artifacts
