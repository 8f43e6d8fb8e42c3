#!/usr/bin/env bash
# make fuzz: bounded coverage-guided fuzzing and memcheck (issue 7, docs/security.md).
#
#   1. libFuzzer + ASan + UBSan on the C functions of csrc/ (fuzz/fuzz_c.c);
#   2. atheris on the Python decoders, one run per target (fuzz/fuzz_decoders.py);
#   3. valgrind memcheck replaying the C seeds and everything the C fuzzer found;
#   4. valgrind memcheck on the C backend through its Python tests (VALGRIND_TESTS).
#
# Each fuzzer runs FUZZ_SECONDS (default 20). Seeds: fuzz/corpus/<target>/ (from
# vectors/, see fuzz/make_corpus.py); working corpora and crash inputs go to
# build/fuzz/. Exit status 1 if any run found a crash or a memcheck error.
# Needs clang (libFuzzer) and valgrind: installed with apt-get when missing and
# running as root, otherwise a clear error. atheris is pip-installed into the venv.
set -u

PY=${PY:-.venv/bin/python}
SECONDS_EACH=${FUZZ_SECONDS:-20}
TARGETS=${FUZZ_TARGETS:-"c keys messages open envelopes text"}
OUT=build/fuzz
# The C backend's tests run under valgrind: the C API tests, and the [c] cases of the others.
VALGRIND_TESTS=${VALGRIND_TESTS:-"tests/wire/test_c_api.py tests/wire/test_padding.py tests/agent/test_agent_block.py \
tests/wire/test_seal.py tests/adapter/test_core_hostile.py"}
CFLAGS_FUZZ="-g -O1 -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Icsrc"
failed=()

say() { printf 'make fuzz: %s\n' "$*"; }
die() { say "$*" >&2; exit 2; }

case $SECONDS_EACH in
    ''|*[!0-9]*) die "FUZZ_SECONDS must be a whole number of seconds, not '$SECONDS_EACH'" ;;
esac

apt_updated=
need_tool() {  # need_tool COMMAND DEBIAN-PACKAGE WHY
    command -v "$1" >/dev/null 2>&1 && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing $2 ($3)"
        if [ -z "$apt_updated" ]; then
            apt-get update -qq || die "apt-get update failed; install $2 by hand"
            apt_updated=1
        fi
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null \
            || die "apt-get install $2 failed; install it by hand"
        command -v "$1" >/dev/null 2>&1 && return 0
    fi
    die "$1 is needed for $3: install it (Debian: apt-get install $2) or run as root"
}

want() { case " $TARGETS " in *" $1 "*) return 0 ;; esac; return 1; }

mkdir -p "$OUT/artifacts"

# -- 1. C functions: libFuzzer with AddressSanitizer and UndefinedBehaviorSanitizer
if want c; then
    need_tool clang clang "libFuzzer with ASan and UBSan"
    # shellcheck disable=SC2086
    clang $CFLAGS_FUZZ -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
        fuzz/fuzz_c.c csrc/simplex_rpc.c -o "$OUT/fuzz_c" \
        || die "building fuzz/fuzz_c.c with clang -fsanitize=fuzzer failed"
    mkdir -p "$OUT/corpus/c"
    say "C functions (libFuzzer, ASan, UBSan), ${SECONDS_EACH}s"
    if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "$OUT/fuzz_c" -max_total_time="$SECONDS_EACH" -max_len=12000 -timeout=10 \
            -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$OUT/artifacts/c-" \
            "$OUT/corpus/c" fuzz/corpus/c fuzz/regressions/c >"$OUT/c.log" 2>&1; then
        tail -40 "$OUT/c.log"
        failed+=("c")
    else
        grep -E '^(Done|stat::new_units_added)' "$OUT/c.log" | sed 's/^/    /'
    fi
fi

# -- 2. Python decoders: atheris
py_targets=()
for t in keys messages open envelopes text; do want "$t" && py_targets+=("$t"); done
if [ ${#py_targets[@]} -gt 0 ]; then
    if ! "$PY" -c 'import atheris' >/dev/null 2>&1; then
        say "installing atheris into $PY's environment"
        "$PY" -m pip install --quiet --disable-pip-version-check atheris \
            || die "pip install atheris failed (it needs a wheel for this Python, or clang)"
    fi
    for t in "${py_targets[@]}"; do
        max_len=4096
        [ "$t" = open ] && max_len=11200
        mkdir -p "$OUT/corpus/$t"
        say "Python target '$t' (atheris), ${SECONDS_EACH}s"
        if ! "$PY" fuzz/fuzz_decoders.py "$t" -max_total_time="$SECONDS_EACH" \
                -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
                -artifact_prefix="$OUT/artifacts/$t-" "$OUT/corpus/$t" "fuzz/corpus/$t" \
                "fuzz/regressions/$t" \
                >"$OUT/$t.log" 2>&1; then
            tail -40 "$OUT/$t.log"
            failed+=("$t")
        else
            grep -E '^(Done|stat::new_units_added)' "$OUT/$t.log" | sed 's/^/    /'
        fi
    done
fi

# -- 3. valgrind memcheck on the C functions, over every C input seen
if want c; then
    need_tool valgrind valgrind "memcheck of the C functions"
    # shellcheck disable=SC2086
    cc $CFLAGS_FUZZ -DSRPC_FUZZ_STANDALONE fuzz/fuzz_c.c csrc/simplex_rpc.c \
        -o "$OUT/replay_c" || die "building the replay driver of fuzz/fuzz_c.c failed"
    say "valgrind memcheck over the C corpus"
    if ! valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=all \
        "$OUT/replay_c" fuzz/corpus/c "$OUT/corpus/c" fuzz/regressions/c; then
        failed+=("valgrind")
    fi
fi

# -- 4. valgrind memcheck on the C backend through its Python tests (the [c] cases)
if want c; then
    if ! "$PY" -c 'import sys, simplex_rpc as sx; sys.exit("c" not in sx.backends)'; then
        say "the C backend is not built: skipping its tests under valgrind"
        failed+=("valgrind-tests")
    else
        ids="$OUT/valgrind-tests.txt"
        # shellcheck disable=SC2086
        "$PY" -m pytest --collect-only -q -p no:cacheprovider $VALGRIND_TESTS 2>/dev/null \
            | grep -E '\[c[]-]|^tests/wire/test_c_api\.py::' >"$ids" || true
        mapfile -t cases <"$ids"
        say "valgrind memcheck over ${#cases[@]} C-backend test cases"
        # CPython is not memcheck-clean by itself: keep only errors in our C code.
        PYTHONMALLOC=malloc valgrind -q --leak-check=no --log-file="$OUT/valgrind-tests.log" \
            "$PY" -m pytest -q -p no:cacheprovider -x "${cases[@]}" \
            >"$OUT/valgrind-pytest.log" 2>&1
        status=$?
        tail -1 "$OUT/valgrind-pytest.log" | sed 's/^/    /'
        if [ $status -ne 0 ]; then
            tail -20 "$OUT/valgrind-pytest.log"
            failed+=("valgrind-tests")
        fi
        if ! "$PY" fuzz/valgrind_filter.py "$OUT/valgrind-tests.log" >"$OUT/valgrind-ours.txt"
        then
            failed+=("valgrind-tests")
        fi
        tail -60 "$OUT/valgrind-ours.txt"
    fi
fi

if [ ${#failed[@]} -gt 0 ]; then
    say "FAILED: ${failed[*]}. Crash inputs are in $OUT/artifacts/; logs in $OUT/*.log."
    say "Fix the bug, then add the input to fuzz/regressions/<target>/ (replayed by make test)."
    exit 1
fi
say "clean: ${TARGETS} ran ${SECONDS_EACH}s each with no crash"
