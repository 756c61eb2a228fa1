# The README's two commands: `make run` and `make test`. Each builds .venv when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.rlfw-installed

.PHONY: run test test-fast style lint docs venv bench clean bytecode

$(STAMP): setup.py
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first and pinned: this is the CPU build on disk; anything looser pulls CUDA.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[all]'
	touch $(STAMP)

venv: $(STAMP)

# The demo run starts afresh each time (a real run folder is never overwritten: rlfw refuses).
run: $(STAMP)
	rm -rf runs/ppo-cartpole
	$(BIN)/python -m rlfw train --algo ppo --env CartPole-v1 --log-dir runs/ppo-cartpole

# test-fast is the unit tier for day-to-day work: it leaves out the learning checks (slow)
# and the whole-run tests (integration); make test runs every tier.
PYTEST := $(BIN)/python -m pytest -q -p no:cacheprovider --durations=25
# Two pytest-xdist workers, one torch thread per process: most tests keep one core busy
# (process start-ups, small nets); three were slower end to end (16:31 against 15:00-15:15
# on a clean clone: the learning checks' own processes then contend). The tests marked
# isolated assert machine-wide state (/dev/shm) that a neighbour would change: they run
# after, alone.
PARALLEL := OMP_NUM_THREADS=1 $(PYTEST) -n 2 --dist worksteal
# A rule broken (pyproject.toml's [tool.ruff] and [tool.mypy]), an unformatted file or a
# type error fails the suite. ruff first (a second); make test runs mypy (a minute on one
# core from a clean clone) beside the tests' two workers, which leave about a third of the
# two cores idle, and fails at the end if it found an error.
style: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

lint: style
	$(BIN)/mypy

# The tests start hundreds of Python processes, and each compiles every rlfw module it
# imports when no bytecode is cached (PYTHONDONTWRITEBYTECODE=1 keeps it from being
# written, and an editable install is never compiled by pip): compile once, first.
bytecode: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m compileall -q -j 2 rlfw tests experiments > /dev/null

test: style bytecode
	$(BIN)/mypy > $(VENV)/mypy.log 2>&1 & typing=$$!; \
	$(PARALLEL) -m "not isolated" tests; tests=$$?; \
	wait $$typing; typed=$$?; cat $(VENV)/mypy.log; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]
	$(PYTEST) -m isolated tests

test-fast: lint bytecode
	$(PARALLEL) -m "not slow and not integration and not isolated" tests
	$(PYTEST) -m "isolated and not slow and not integration" tests

# the manual: --strict (mkdocs.yml) fails on a dead link, a missing page or a broken anchor
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(STAMP)
	$(BIN)/python experiments/bench/cartpole_vs_sb3.py

clean:
	rm -rf $(VENV) runs .pytest_cache build *.egg-info
