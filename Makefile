# Two commands do all the set-up on a fresh machine (each creates .venv when missing):
#   make run    -- the main job (quick leaderboard: table, TensorBoard logs, plots)
#   make test   -- the fast test tier (the slow tier: make test-slow; experiments/: make test-experiments)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-slow test-experiments test-all bench lint typecheck clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[train,plots,stats,zoo,dev,ray,rllib,offline,multiagent,mo,fast]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/aryl-gym main

# the fast tier: everything but the tests marked slow or experiments (pyproject.toml's addopts),
# on two processes (pytest-xdist), one thread each: torch's spinning worker threads would
# oversubscribe two cores (on this loaded machine: 101.5 s of CPU with them, 90.6 s without)
test: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2

# full-episode regressions, Ray, process kills, training runs
test-slow: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m slow

# the tests of experiments/ (most need the shipped ppo-v1-kickstart weights)
test-experiments: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m experiments

test-all: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m ''

bench: $(STAMP)
	$(BIN)/aryl-gym bench

lint: $(STAMP)
	$(BIN)/ruff check aryl_gym agents tests scripts experiments

typecheck: $(STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) runs results
