# The two commands in the README. Each makes its own virtual environment.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The editable install is a tree of links to the sources (setuptools' strict mode: the
# `clozeworks.*` names map onto the top-level folders, and mypy can follow links where it
# cannot follow an import hook). A module added, moved or removed needs a new tree, so the
# stamp's name carries a checksum of the list of modules.
MODULES := $(shell find clozeworks corpus pipelines schemas trainer -name '*.py' | sort | cksum | cut -d' ' -f1)
STAMP := $(VENV)/.installed-$(MODULES)

.PHONY: demo test test-all lint bench clean-venv

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]' --config-settings editable_mode=strict
	rm -f $(VENV)/.installed*
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/cloze demo --output demo-out

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# A test file to a worker, as many workers as cores (at most 4): module fixtures (an
# emulator, a job server, a built corpus) are made once, and each worker's memory stays
# that of one test file's.
PARALLEL = -n auto --maxprocesses 4 --dist loadfile

test: lint
	$(BIN)/python -m pytest -q $(PARALLEL) --durations=30

# Everything, including the slow end-to-end and statistical tests.
test-all: lint
	$(BIN)/python -m pytest -q $(PARALLEL) -m ''

clean-venv:
	rm -rf $(VENV)
