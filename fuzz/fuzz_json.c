/*
 * libFuzzer harness for the strict JSON validator (csrc/json_strict.c), built by
 * make sanitize with -fsanitize=fuzzer,address,undefined; seeds are the JSON texts
 * of vectors/envelopes.json (fuzz/corpus/json). The input is the JSON text itself.
 *
 * The input is handed over as an exactly sized heap copy, so any read past it is
 * an ASan error. Beyond memory safety, the contract of simplex_rpc.h is checked:
 * the fast call (no err) and the explaining call agree; the stack workspace and a
 * caller's workspace (sized by the open names the explaining call counts), and two
 * hash seeds, give the same verdict; an accepted input
 * starts its value after whitespace only; an error's offsets and spans lie inside
 * the input and its fields are in range for its status.
 */
#include "simplex_rpc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_json: check failed at line %d: %s\n", __LINE__, #cond); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

/* The verdict with a caller's workspace of exactly the size asked for: the open
 * names counted by an explaining call (the stack's 257 at least), never more than a
 * name per four bytes of input ("":0). With that size it never asks again. */
static long long with_workspace(const unsigned char *s, size_t n, uint64_t seed,
                                srpc_json_error *err)
{
    srpc_json_error need;
    memset(&need, 0xa5, sizeof need);
    size_t count = 1000; /* a caller's workspace even when the stack's suffices */
    long long first = srpc_json_check(s, n, seed, NULL, 0, &need);
    if (first == SRPC_E_JSON_WORKSPACE) {
        CHECK(need.status == SRPC_E_JSON_WORKSPACE);
        CHECK(need.value > 256 && need.value <= n / 4 + 2);
        count = need.value;
    }
    size_t size = srpc_json_workspace_size(count);
    void *ws = malloc(size);
    CHECK(ws != NULL);
    long long r = srpc_json_check(s, n, seed, ws, size, err);
    free(ws);
    CHECK(r != SRPC_E_JSON_WORKSPACE);
    if (first != SRPC_E_JSON_WORKSPACE) {
        CHECK(r == first || (r < 0 && first < 0));
    }
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *s = malloc(size ? size : 1);
    CHECK(s != NULL);
    if (size) {
        memcpy(s, data, size);
    }
    srpc_json_error err;
    memset(&err, 0xa5, sizeof err);
    long long fast = srpc_json_check(s, size, 1, NULL, 0, NULL);
    long long full = with_workspace(s, size, 0x9e3779b97f4a7c15u, NULL);
    if (fast != SRPC_E_JSON_WORKSPACE) {
        CHECK(fast == full || (fast < 0 && full < 0));
    }
    long long explained = with_workspace(s, size, 7, &err);
    CHECK((explained >= 0) == (full >= 0));
    if (full >= 0) {
        CHECK(explained == full);
        CHECK((size_t)full <= size);
        for (long long i = 0; i < full; i++) {
            unsigned char c = s[i];
            CHECK(c == ' ' || c == '\t' || c == '\n' || c == '\r');
        }
    } else {
        CHECK(err.status == (int)explained);
        CHECK(err.status <= SRPC_E_JSON_UTF8 && err.status >= SRPC_E_JSON_SURROGATE);
        CHECK(err.offset <= size && err.chars <= err.offset);
        CHECK(err.length <= size - err.offset);
        if (err.status == SRPC_E_JSON_DUPLICATE) {
            CHECK(err.length >= 2 && s[err.offset] == '"' && s[err.offset + err.length - 1] == '"');
        }
        if (err.status == SRPC_E_JSON_RANGE) {
            CHECK(err.length >= 3);
        }
        if (err.status == SRPC_E_JSON_INT_DIGITS) {
            CHECK(err.value > SRPC_JSON_MAX_INT_DIGITS && err.value <= err.length);
        }
        if (err.status == SRPC_E_JSON_SURROGATE) {
            CHECK(err.value >= 0xd800 && err.value <= 0xdfff);
        }
        if (err.status == SRPC_E_JSON_UTF8) {
            CHECK(err.offset < size && err.chars == err.offset);
        }
    }
    free(s);
    return 0;
}
