/*
 * libFuzzer harness for the C functions of csrc/ (make fuzz and make sanitize),
 * built with -fsanitize=fuzzer,address,undefined. Built with -DSRPC_FUZZ_STANDALONE it
 * is a plain program that replays files and directories of inputs, for
 * valgrind memcheck and for replaying a crash without libFuzzer.
 *
 * An input is: op (1 byte), flags (1 byte), a 16-bit big-endian parameter,
 * then the data. Every buffer handed to the library is a heap copy of exactly
 * the size the call is told, so any read or write past it is an ASan (or
 * memcheck) error. Beyond memory safety, each op checks the contract of
 * simplex_rpc.h: results in range and exact round trips (pad then unpad,
 * seal then unpad, the in-place signing layout).
 */
#include "simplex_rpc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OP_UNPAD, OP_UNPAD_MANY, OP_SEAL_PARTS, OP_SIGNED, OP_PAD, OP_SIGNED_MESSAGE,
       OP_PAD_MANY, OP_SEAL_PARTS_MANY, OP_REQUEST_HEAD, OP_COUNT };
enum { FLAG_EXACT = 1, FLAG_STRICT = 2, FLAG_LENGTH_IS_SIZE = 4, FLAG_SHORT_OUT = 32 };

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "fuzz_c: check failed at line %d: %s\n", __LINE__, #cond); \
            abort();                                                             \
        }                                                                        \
    } while (0)

/* An exactly sized heap copy (never NULL: one spare byte for size 0, unused). */
static unsigned char *dup_exact(const unsigned char *data, size_t size)
{
    unsigned char *copy = malloc(size ? size : 1);
    CHECK(copy != NULL);
    if (size) {
        memcpy(copy, data, size);
    }
    return copy;
}

static void check_error(int status, const srpc_error *err)
{
    CHECK(status < 0);
    CHECK(err->status == status);
}

static void fuzz_unpad(int flags, size_t param, const unsigned char *data, size_t size)
{
    srpc_error err;
    unsigned char *block = dup_exact(data, size);
    int exact = (flags & FLAG_EXACT) != 0;
    int strict = (flags & FLAG_STRICT) != 0;
    size_t length = (flags & FLAG_LENGTH_IS_SIZE) ? size : param;
    int n = srpc_unpad(block, size, exact, length, strict, &err);
    CHECK(n == srpc_unpad(block, size, exact, length, strict, NULL));
    if (n < 0) {
        check_error(n, &err);
        if (n == SRPC_E_UNPAD_FILL) {
            CHECK(err.offset >= 2 && err.offset < size && block[err.offset] != '#');
        }
    } else {
        CHECK((size_t)n + 2 <= size);
        CHECK(!exact || size == length);
        if (strict) {
            /* A strict block is exactly what pad writes. */
            unsigned char *again = malloc(size);
            CHECK(again != NULL);
            CHECK(srpc_pad(block + 2, (size_t)n, size, again, size, NULL) == SRPC_OK);
            CHECK(memcmp(again, block, size) == 0);
            free(again);
        }
    }
    free(block);
}

static void fuzz_unpad_many(int flags, size_t param, const unsigned char *data, size_t size)
{
    srpc_error err;
    unsigned char *buf = dup_exact(data, size);
    size_t length = param % 512;
    size_t count = length >= 2 ? size / length : 0;
    size_t *lens = malloc((count ? count : 1) * sizeof(size_t));
    int strict = (flags & FLAG_STRICT) != 0;
    int status;
    size_t i;

    CHECK(lens != NULL);
    status = srpc_unpad_many(buf, size, length, strict, lens, count, &err);
    if (status < 0) {
        check_error(status, &err);
        if (length >= 2 && size % length == 0 && status != SRPC_E_ARGUMENT) {
            CHECK(err.index < count);
        }
    } else {
        CHECK(length >= 2 && size % length == 0);
        for (i = 0; i < count; i++) {
            CHECK(lens[i] + 2 <= length);
            CHECK(srpc_unpad(buf + i * length, length, 1, length, strict, NULL) == (int)lens[i]);
        }
    }
    free(lens);
    free(buf);
}

/* data = head length (1 byte), head, payload: pad(head || payload) into `param` bytes. */
static void fuzz_seal_parts(int flags, size_t param, const unsigned char *data, size_t size)
{
    srpc_error err;
    size_t head_len = size ? data[0] : 0;
    const unsigned char *rest = data + (size ? 1 : 0);
    size_t avail = size ? size - 1 : 0;
    unsigned char *head;
    unsigned char *payload;
    size_t payload_len;
    size_t out_len = (flags & FLAG_SHORT_OUT) && param ? param - 1 : param;
    unsigned char *out = malloc(out_len ? out_len : 1);
    int status;

    CHECK(out != NULL);
    if (head_len > avail) {
        head_len = avail;
    }
    head = dup_exact(rest, head_len);
    payload_len = avail - head_len;
    payload = dup_exact(rest + head_len, payload_len);
    status = srpc_seal_parts(head, head_len, payload, payload_len, out, out_len, &err);
    if (status < 0) {
        check_error(status, &err);
    } else {
        CHECK(srpc_unpad(out, out_len, 1, out_len, 1, NULL) == (int)(head_len + payload_len));
        CHECK(head_len == 0 || memcmp(out + 2, head, head_len) == 0);
        CHECK(payload_len == 0 || memcmp(out + 2 + head_len, payload, payload_len) == 0);
    }
    free(payload);
    free(head);
    free(out);
}

/* data = head length (1 byte), count (1 byte), head, then payloads: the same head before
 * each of `count` slices of what is left, into blocks of `param` bytes. */
static void fuzz_seal_parts_many(int flags, size_t param, const unsigned char *data,
                                 size_t size)
{
    srpc_error err;
    size_t head_len = size > 1 ? data[0] : 0;
    size_t count = size > 1 ? data[1] % 9 : 0;
    const unsigned char *rest = data + (size > 1 ? 2 : size);
    size_t avail = size > 1 ? size - 2 : 0;
    size_t lens[8];
    size_t total, i, at;
    unsigned char *head;
    unsigned char *src;
    unsigned char *out;
    size_t out_len;
    int status;

    if (head_len > avail) {
        head_len = avail;
    }
    total = avail - head_len;
    for (i = 0, at = 0; i < count; i++) {
        lens[i] = (i + 1 == count) ? total - at : (total - at) / 2;
        at += lens[i];
    }
    if (flags & FLAG_SHORT_OUT && count) {
        lens[0] += 1; /* a length past the end of src */
    }
    head = dup_exact(rest, head_len);
    src = dup_exact(rest + head_len, total);
    out_len = (param && count && param <= 70000) ? count * param : 0;
    out = malloc(out_len ? out_len : 1);
    CHECK(out != NULL);
    status = srpc_seal_parts_many(head, head_len, src, total, count ? lens : NULL, count, param,
                                  out, out_len, &err);
    if (status < 0) {
        check_error(status, &err);
    } else {
        for (i = 0, at = 0; i < count; i++) {
            CHECK(srpc_unpad(out + i * param, param, 1, param, 1, NULL)
                  == (int)(head_len + lens[i]));
            CHECK(lens[i] == 0 || memcmp(out + i * param + 2 + head_len, src + at, lens[i]) == 0);
            at += lens[i];
        }
    }
    free(out);
    free(src);
    free(head);
}

/* The in-place signing layout: begin with payload_at from the data's first byte, a fake
 * "signature" where libsodium would write it, then end with a head of the right length. */
static void fuzz_signed(int flags, size_t param, const unsigned char *data, size_t size)
{
    static const unsigned char tag[SRPC_TAG_LENGTH] = {1, 2, 3, 4, 5, 6, 7, 8};
    srpc_error err;
    size_t payload_at = (size ? data[0] : 0) + SRPC_SIGN_MIN_PAYLOAD_AT - 4;
    unsigned char *payload = dup_exact(data + (size ? 1 : 0), size ? size - 1 : 0);
    size_t payload_len = size ? size - 1 : 0;
    size_t length = param;
    unsigned char *block = malloc(length ? length : 1);
    int status;

    (void)flags;
    CHECK(block != NULL);
    status = srpc_seal_signed_begin(tag, payload, payload_len, payload_at, block, length, &err);
    if (status < 0) {
        check_error(status, &err);
    } else {
        size_t head_len = payload_at - 2 - SRPC_SIGNATURE_LENGTH;
        unsigned char *head = malloc(head_len);
        CHECK(head != NULL);
        memset(head, 'h', head_len);
        CHECK(memcmp(block + payload_at - SRPC_TAG_LENGTH, tag, SRPC_TAG_LENGTH) == 0);
        memset(block + payload_at - 96, 's', SRPC_SIGNATURE_LENGTH); /* crypto_sign's place */
        CHECK(srpc_seal_signed_end(head, head_len, block, length, payload_at) == SRPC_OK);
        CHECK(srpc_unpad(block, length, 1, length, 1, NULL) == (int)(payload_at - 2 + payload_len));
        CHECK(memcmp(block + 2, head, head_len) == 0);
        CHECK(block[payload_at - 1] == 's' && block[payload_at - SRPC_SIGNATURE_LENGTH] == 's');
        CHECK(payload_len == 0 || memcmp(block + payload_at, payload, payload_len) == 0);
        CHECK(srpc_seal_signed_end(head, head_len - 1, block, length, payload_at)
              == SRPC_E_ARGUMENT);
        free(head);
    }
    free(block);
    free(payload);
}

/* sig || tag || payload, for sm lengths right and wrong. */
static void fuzz_signed_message(int flags, size_t param, const unsigned char *data, size_t size)
{
    unsigned char sig[SRPC_SIGNATURE_LENGTH] = {9};
    unsigned char tag[SRPC_TAG_LENGTH] = {7};
    unsigned char *payload = dup_exact(data, size);
    size_t sm_len = 96 + size;
    unsigned char *sm;
    int status;

    if (flags & FLAG_SHORT_OUT) {
        sm_len = param % (sm_len + 2);
    }
    sm = malloc(sm_len ? sm_len : 1);
    CHECK(sm != NULL);
    status = srpc_signed_message(sig, tag, payload, size, sm, sm_len);
    if (sm_len == 96 + size) {
        CHECK(status == SRPC_OK);
        CHECK(memcmp(sm, sig, 64) == 0 && memcmp(sm + 64, tag, 32) == 0);
        CHECK(size == 0 || memcmp(sm + 96, payload, size) == 0);
    } else {
        CHECK(status == SRPC_E_ARGUMENT);
    }
    free(sm);
    free(payload);
}

static void fuzz_pad(int flags, size_t param, const unsigned char *data, size_t size)
{
    srpc_error err;
    unsigned char *msg = dup_exact(data, size);
    size_t length = param;
    size_t out_len = (flags & FLAG_SHORT_OUT) && length ? length - 1 : length;
    unsigned char *out = malloc(out_len ? out_len : 1);
    int status;

    CHECK(out != NULL);
    status = srpc_pad(msg, size, length, out, out_len, &err);
    if (status < 0) {
        check_error(status, &err);
    } else {
        CHECK(out_len == length);
        CHECK(srpc_unpad(out, length, 1, length, 1, NULL) == (int)size);
        CHECK(size == 0 || memcmp(out + 2, msg, size) == 0);
    }
    free(out);
    free(msg);
}

static void fuzz_pad_many(int flags, size_t param, const unsigned char *data, size_t size)
{
    srpc_error err;
    size_t count = size ? data[0] % 17 : 0;
    size_t lens[16];
    size_t total = 0;
    size_t i;
    size_t length = param;
    const unsigned char *msgs = data + (size ? 1 : 0);
    size_t avail = size ? size - 1 : 0;
    unsigned char *src;
    unsigned char *out;
    size_t out_len;
    int status;

    if (count > 16) {
        count = 16;
    }
    for (i = 0; i < count; i++) {
        size_t want = (i < avail) ? msgs[i] : 0;
        if (want > avail - total) {
            want = avail - total;
        }
        lens[i] = want;
        total += want;
    }
    if (flags & FLAG_SHORT_OUT) {
        total = avail; /* a src length that does not match the lengths */
    }
    src = dup_exact(msgs, total);
    out_len = (length && count && length <= 70000) ? count * length : 0;
    out = malloc(out_len ? out_len : 1);
    CHECK(out != NULL);
    status = srpc_pad_many(src, total, count ? lens : NULL, count, length, out, out_len, &err);
    if (status < 0) {
        check_error(status, &err);
    } else {
        size_t at = 0;
        for (i = 0; i < count; i++) {
            CHECK(srpc_unpad(out + i * length, length, 1, length, 1, NULL) == (int)lens[i]);
            CHECK(lens[i] == 0 || memcmp(out + i * length + 2, src + at, lens[i]) == 0);
            at += lens[i];
        }
    }
    free(out);
    free(src);
}

/* The request's head (srpc_request_head, srpc_open_request): the data is a message.
 * What C reads must be a head that fits the message: queues in order, each field inside
 * it, the DH key's 44-byte length, a known mode, the payload after the signature field;
 * srpc_open_request of the padded message reads the same, and lays out the signed
 * message as srpc_signed_message does. (tests/wire/test_c_request_head.py checks the values
 * against the codec.) */
static void fuzz_request_head(int flags, size_t param, const unsigned char *data, size_t size)
{
    size_t res[SRPC_HEAD_RESULT_LENGTH], again[SRPC_HEAD_RESULT_LENGTH];
    unsigned char *msg = dup_exact(data, size);
    unsigned char *block;
    unsigned char *sm;
    unsigned char tag[32];
    size_t base = param, i, at, sm_len;
    int status;

    status = srpc_request_head(msg, size, base, res, SRPC_HEAD_RESULT_LENGTH);
    CHECK(srpc_request_head(msg, size, base, res, SRPC_HEAD_RESULT_LENGTH - 1)
          == SRPC_E_ARGUMENT);
    CHECK(status == SRPC_OK || status == SRPC_HEAD_DEFER);
    CHECK(res[0] == size);
    if (status == SRPC_OK) {
        CHECK(res[3] >= 1 && res[3] <= SRPC_HEAD_QUEUES && msg[0] == 'A' && msg[1] == res[3]);
        at = base + 2;
        for (i = 0; i < res[3]; i++) {
            const size_t *q = res + 4 + i * SRPC_HEAD_QUEUE_FIELDS;
            CHECK(q[0] == at && q[0] + 2 < q[1] && q[1] < q[2] && q[2] + 45 <= q[3]);
            CHECK(q[3] <= base + size && msg[q[2] - base] == SRPC_SPKI_LENGTH);
            CHECK(q[4] >= 2 && q[4] == (((size_t)msg[q[0] - base] << 8) | msg[q[0] - base + 1]));
            CHECK(q[5] == 0 || q[5] == 'M' || q[5] == 'C');
            at = q[3];
        }
        CHECK(res[1] <= base + size && res[1] == at + (res[2] ? 111 : 1));
        CHECK(msg[at - base] == (res[2] ? '1' : '0'));
        CHECK(res[2] == 0 || res[2] == at + 14);
    }
    if (size <= SRPC_PADDED_LENGTH - 2) {
        block = malloc(SRPC_PADDED_LENGTH);
        CHECK(block != NULL);
        CHECK(srpc_pad(msg, size, SRPC_PADDED_LENGTH, block, SRPC_PADDED_LENGTH, NULL) == 0);
        memset(tag, 0x5a, sizeof tag);
        sm_len = (flags & FLAG_SHORT_OUT) ? param % (96 + size + 2) : 96 + size;
        sm = malloc(sm_len ? sm_len : 1);
        CHECK(sm != NULL);
        int opened = srpc_open_request(block, SRPC_PADDED_LENGTH, (flags & FLAG_STRICT) != 0,
                                       tag, sm, sm_len, again, SRPC_HEAD_RESULT_LENGTH, NULL);
        status = srpc_request_head(msg, size, 2, res, SRPC_HEAD_RESULT_LENGTH);
        if (opened == SRPC_E_ARGUMENT) {
            CHECK(status == SRPC_OK && res[2] != 0 && sm_len < 96 + (2 + size - res[1]));
        } else {
            CHECK(opened == status && again[0] == size);
        }
        if (opened == SRPC_OK) {
            CHECK(memcmp(again, res, (4 + res[3] * SRPC_HEAD_QUEUE_FIELDS) * sizeof *res) == 0);
            if (res[2] != 0) {
                size_t payload_len = 2 + size - res[1];
                CHECK(memcmp(sm, block + res[1] - 64, 64) == 0 && memcmp(sm + 64, tag, 32) == 0);
                CHECK(payload_len == 0 || memcmp(sm + 96, block + res[1], payload_len) == 0);
            }
        }
        free(sm);
        free(block);
    }
    free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int op;
    int flags;
    size_t param;

    if (size < 4) {
        return 0;
    }
    op = data[0] % OP_COUNT;
    flags = data[1];
    param = ((size_t)data[2] << 8) | data[3];
    data += 4;
    size -= 4;
    switch (op) {
    case OP_UNPAD: fuzz_unpad(flags, param, data, size); break;
    case OP_UNPAD_MANY: fuzz_unpad_many(flags, param, data, size); break;
    case OP_SEAL_PARTS: fuzz_seal_parts(flags, param, data, size); break;
    case OP_SIGNED: fuzz_signed(flags, param, data, size); break;
    case OP_PAD: fuzz_pad(flags, param, data, size); break;
    case OP_SIGNED_MESSAGE: fuzz_signed_message(flags, param, data, size); break;
    case OP_PAD_MANY: fuzz_pad_many(flags, param, data, size); break;
    case OP_REQUEST_HEAD: fuzz_request_head(flags, param, data, size); break;
    default: fuzz_seal_parts_many(flags, param, data, size); break;
    }
    return 0;
}

#ifdef SRPC_FUZZ_STANDALONE
#include <dirent.h>
#include <sys/stat.h>

static size_t replayed;

static void replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long n;

    CHECK(f != NULL);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    n = ftell(f);
    CHECK(n >= 0);
    rewind(f);
    buf = malloc((size_t)n + 1);
    CHECK(buf != NULL);
    CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    replayed++;
}

static void replay(const char *path)
{
    struct stat st;
    DIR *dir;
    struct dirent *entry;
    char child[4096];

    CHECK(stat(path, &st) == 0);
    if (!S_ISDIR(st.st_mode)) {
        replay_file(path);
        return;
    }
    dir = opendir(path);
    CHECK(dir != NULL);
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.') {
            continue;
        }
        snprintf(child, sizeof child, "%s/%s", path, entry->d_name);
        replay(child);
    }
    closedir(dir);
}

int main(int argc, char **argv)
{
    int i;

    for (i = 1; i < argc; i++) {
        replay(argv[i]);
    }
    printf("fuzz_c: replayed %zu inputs\n", replayed);
    return 0;
}
#endif
