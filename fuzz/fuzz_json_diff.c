/*
 * Differential libFuzzer harness: the C validator (csrc/json_strict.c, compiled
 * into this program with ASan, UBSan and coverage) against the pure backend
 * (src/simplex_rpc/_wire/json_pure.py), run by an embedded CPython. make sanitize builds and
 * runs it; seeds are fuzz/corpus/json.
 *
 * For each input, C's verdict (the value's offset, or the explained error) goes to
 * fuzz/json_oracle.py, which words C's error as the C backend does and compares it
 * with the pure backend's outcome on the same bytes: accept or refuse, the message,
 * and the value. Any disagreement raises there, and this harness aborts.
 * Needs PYTHONPATH with src/, fuzz/ and the venv's site-packages.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "simplex_rpc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static PyObject *oracle;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    Py_Initialize();
    PyObject *module = PyImport_ImportModule("json_oracle");
    if (module == NULL) {
        PyErr_Print();
        abort();
    }
    oracle = PyObject_GetAttrString(module, "check");
    Py_DECREF(module);
    if (oracle == NULL) {
        PyErr_Print();
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *s = malloc(size ? size : 1);
    if (s == NULL) {
        abort();
    }
    if (size) {
        memcpy(s, data, size);
    }
    srpc_json_error err;
    memset(&err, 0, sizeof err);
    /* as the C backend does: the stack workspace, then one for the open names counted */
    long long result = srpc_json_check(s, size, 42, NULL, 0, &err);
    size_t ws_size = srpc_json_workspace_size(result == SRPC_E_JSON_WORKSPACE ? err.value : 0);
    void *ws = malloc(ws_size);
    if (ws == NULL) {
        abort();
    }
    if (result == SRPC_E_JSON_WORKSPACE) {
        memset(&err, 0, sizeof err);
        result = srpc_json_check(s, size, 42, ws, ws_size, &err);
    }
    PyObject *ok = PyObject_CallFunction(oracle, "y#Lnnnn", (const char *)s, (Py_ssize_t)size,
                                         result, (Py_ssize_t)err.offset, (Py_ssize_t)err.chars,
                                         (Py_ssize_t)err.length, (Py_ssize_t)err.value);
    if (ok == NULL) {
        PyErr_Print();
        abort();
    }
    Py_DECREF(ok);
    free(ws);
    free(s);
    return 0;
}
