# The two commands of README.md: `make demo` and `make test`. Everything else
# is for developers. Recipes use the project's own .venv, created on demand.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CLI := $(VENV)/bin/simplex-rpc
STAMP := $(VENV)/.simplex-rpc-installed

# A failed C build is fatal for the project's own targets (see csrc/).
export SIMPLEX_RPC_BUILD_C ?= 1

.PHONY: demo test install lint typecheck vectors clean

$(STAMP): pyproject.toml $(wildcard setup.py) $(wildcard csrc/*) $(wildcard src/simplex_rpc/_build_c.py)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip setuptools wheel
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(CLI) demo

test: $(STAMP)
	$(PY) -m pytest -q
	SIMPLEX_RPC_PURE=1 $(PY) -m pytest -q
	$(CLI) vectors check

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

vectors: $(STAMP)
	$(CLI) vectors generate vectors

clean:
	rm -rf build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis

# Bounded fuzzing (docs/security.md): libFuzzer + ASan + UBSan on the C functions,
# atheris on the Python decoders, valgrind memcheck over the C corpus. Each fuzzer
# runs FUZZ_SECONDS; seeds in fuzz/corpus/ (from vectors/), findings in build/fuzz/.
FUZZ_SECONDS ?= 20
.PHONY: fuzz
fuzz: $(STAMP)
	PY=$(PY) FUZZ_SECONDS=$(FUZZ_SECONDS) bash fuzz/run.sh
