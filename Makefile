# distlab: `make run` executes every notebook at smoke scale; `make test` runs the checks;
# `make rehearse` runs every notebook's paper-scale path on this machine, cut to a budget.
# Both create or refresh .venv first (env/setup.sh; idempotent).

VENV   := .venv
PY     := $(VENV)/bin/python
CACHE  := $(HOME)/.cache/distlab

# Keep every tool's state inside the repo, the temp dir or ~/.cache/distlab.
export DISTLAB_CACHE       ?= $(CACHE)
export PIP_CACHE_DIR       ?= $(CACHE)/pip
export IPYTHONDIR          ?= $(CACHE)/ipython
export JUPYTER_RUNTIME_DIR ?= $(CACHE)/jupyter/runtime
export JUPYTER_DATA_DIR    ?= $(CACHE)/jupyter/data
export KERAS_HOME          ?= $(CACHE)/keras
export MPLCONFIGDIR        ?= $(CACHE)/matplotlib
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONUNBUFFERED    := 1

.PHONY: setup run rehearse test lint lab bench clean

setup:
	@env/setup.sh

run: setup
	$(PY) -m lab notebooks --scale smoke

# every notebook's paper-scale path on this machine's rehearsal cluster (needs root), two
# notebooks at a time (a rehearsal measures nothing; much of it waits on links and
# timed phases; 19 of 19 in 27-29 min from a fresh clone on 2 cores, 2026-12-02):
# results/rehearsals/, never a verdict (lab/experiments/rehearsing.py)
rehearse: setup
	$(PY) -m lab notebooks --scale paper --rehearse --lanes 2

lint: setup
	$(VENV)/bin/ruff check lab tests
	$(VENV)/bin/ruff format --check lab tests

# two pytest workers (pytest-xdist): most slow tests wait on engines starting up, a
# scheduler or a browser, so the two cores here are busier with two at once; every test
# picks its own ports, namespaces and temporary files, so they may run side by side
test: lint
	$(PY) -m pytest -n 2 --dist worksteal

lab: setup
	$(PY) -m ipykernel install --sys-prefix --name distlab --display-name "distlab (.venv)"
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=$(CURDIR) $(if $(filter 0,$(shell id -u)),--allow-root) notebooks

bench: setup
	$(PY) -m lab bench

clean:
	rm -rf .pytest_cache .ruff_cache
