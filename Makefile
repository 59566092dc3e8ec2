# Two commands do all the set-up on a fresh machine (each creates .venv when missing):
#   make run    -- the main job (quick leaderboard: table, TensorBoard logs, plots)
#   make test   -- the test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-all bench lint typecheck clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[train,plots,stats,zoo,dev,ray]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/aryl-gym main

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -m ''

bench: $(STAMP)
	$(BIN)/aryl-gym bench

lint: $(STAMP)
	$(BIN)/ruff check aryl_gym agents tests scripts

typecheck: $(STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) runs results
