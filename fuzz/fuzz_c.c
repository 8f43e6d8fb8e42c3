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
 * simplex_rpc.h: results in range, offsets inside the buffer, and exact round
 * trips (decode then encode, pad then unpad, seal then open).
 */
#include "simplex_rpc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OP_UNPAD, OP_UNPAD_MANY, OP_FRAME_DECODE, OP_OPEN, OP_PAD, OP_SEAL, OP_PAD_MANY,
       OP_ENCODE, OP_COUNT };
enum { FLAG_EXACT = 1, FLAG_STRICT = 2, FLAG_LENGTH_IS_SIZE = 4, FLAG_ANY = 8, FLAG_TAG = 16,
       FLAG_SHORT_OUT = 32, FLAG_FIX_PREFIX = 64, FLAG_SIGNED = 128 };

static const unsigned char spki_prefix[SRPC_SPKI_PREFIX_LENGTH] = {
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
};

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

static void check_frame(const srpc_frame *f, size_t base, size_t size)
{
    size_t head = srpc_frame_head_length(f->kind, f->is_signed);

    CHECK(f->kind == SRPC_REQUEST || f->kind == SRPC_RESPONSE);
    CHECK(head != 0);
    CHECK(f->payload_offset == base + head);
    CHECK(f->payload_offset <= size && f->payload_length == size - f->payload_offset);
    if (f->is_signed) {
        CHECK(f->kind == SRPC_REQUEST);
        CHECK(f->key_offset + SRPC_SPKI_LENGTH <= size);
        CHECK(f->sig_offset + SRPC_SIGNATURE_LENGTH <= f->payload_offset);
    }
}

static void fuzz_frame_decode(const unsigned char *data, size_t size)
{
    srpc_error err;
    srpc_frame f;
    unsigned char *frame = dup_exact(data, size);
    int status = srpc_frame_decode(frame, size, &f, &err);

    if (status < 0) {
        check_error(status, &err);
        CHECK(err.offset < (size > 114 ? size : 114));
    } else {
        unsigned char *again;
        size_t head = srpc_frame_head_length(f.kind, f.is_signed);
        check_frame(&f, 0, size);
        again = malloc(size ? size : 1);
        CHECK(again != NULL);
        CHECK(srpc_frame_encode(f.kind, f.is_signed,
                                f.is_signed ? frame + f.key_offset : NULL,
                                f.is_signed ? frame + f.sig_offset : NULL,
                                frame + head, size - head, again, size, NULL) == SRPC_OK);
        CHECK(memcmp(again, frame, size) == 0);
        free(again);
    }
    free(frame);
}

static void fuzz_open(int flags, size_t param, const unsigned char *data, size_t size)
{
    static const unsigned char tag[SRPC_TAG_LENGTH] = {1, 2, 3, 4, 5, 6, 7, 8};
    srpc_error err;
    srpc_frame f;
    unsigned char *block = dup_exact(data, size);
    size_t length = (flags & FLAG_LENGTH_IS_SIZE) ? size : param;
    int expect = (flags & FLAG_ANY) ? SRPC_ANY : ((flags & FLAG_SIGNED) ? SRPC_RESPONSE
                                                                         : SRPC_REQUEST);
    size_t sm_len = size > 2 ? 96 + size : 96;
    unsigned char *sm;
    int status;

    if (flags & FLAG_SHORT_OUT) {
        sm_len = param % (sm_len + 1);
    }
    sm = malloc(sm_len ? sm_len : 1);
    CHECK(sm != NULL);
    status = srpc_open(block, size, length, (flags & FLAG_STRICT) != 0, expect,
                       (flags & FLAG_TAG) ? tag : NULL, sm, sm_len, &f, &err);
    if (status < 0) {
        check_error(status, &err);
    } else {
        size_t n = ((size_t)block[0] << 8) | block[1];
        CHECK(size == length && n + 2 <= size);
        check_frame(&f, 2, n + 2);
        if (f.is_signed && (flags & FLAG_TAG)) {
            CHECK(memcmp(sm, block + f.sig_offset, SRPC_SIGNATURE_LENGTH) == 0);
            CHECK(memcmp(sm + SRPC_SIGNATURE_LENGTH, tag, SRPC_TAG_LENGTH) == 0);
            CHECK(f.payload_length == 0
                  || memcmp(sm + 96, block + f.payload_offset, f.payload_length) == 0);
        }
    }
    free(sm);
    free(block);
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

/* Split data into key DER (44), signature (64) and payload, for a signed frame. */
static void fuzz_seal(int flags, size_t param, const unsigned char *data, size_t size,
                      int encode_only)
{
    srpc_error err;
    int is_signed = (flags & FLAG_SIGNED) != 0;
    int kind = (flags & FLAG_ANY) ? SRPC_RESPONSE : SRPC_REQUEST;
    unsigned char key[SRPC_SPKI_LENGTH] = {0};
    unsigned char sig[SRPC_SIGNATURE_LENGTH] = {0};
    size_t used = 0;
    unsigned char *payload;
    size_t payload_len;
    unsigned char *out;
    size_t out_len;
    int status;

    if (flags & FLAG_EXACT) {
        kind = (int)(param % 4); /* includes SRPC_ANY (0) and an unknown kind (3) */
    }
    if (is_signed && size >= SRPC_SPKI_LENGTH + SRPC_SIGNATURE_LENGTH) {
        memcpy(key, data, SRPC_SPKI_LENGTH);
        memcpy(sig, data + SRPC_SPKI_LENGTH, SRPC_SIGNATURE_LENGTH);
        used = SRPC_SPKI_LENGTH + SRPC_SIGNATURE_LENGTH;
    }
    if (flags & FLAG_FIX_PREFIX) {
        memcpy(key, spki_prefix, sizeof spki_prefix);
    }
    payload_len = size - used;
    payload = dup_exact(data + used, payload_len);
    if (encode_only) {
        size_t head = srpc_frame_head_length(kind, is_signed);
        out_len = head + payload_len;
        if ((flags & FLAG_SHORT_OUT) && out_len) {
            out_len -= 1;
        }
        out = malloc(out_len ? out_len : 1);
        CHECK(out != NULL);
        status = srpc_frame_encode(kind, is_signed, key, sig, payload, payload_len, out,
                                   out_len, &err);
        if (status < 0) {
            check_error(status, &err);
        } else {
            srpc_frame f;
            CHECK(head != 0 && out_len == head + payload_len);
            CHECK(srpc_frame_decode(out, out_len, &f, NULL) == SRPC_OK);
            CHECK(f.kind == kind && f.is_signed == is_signed);
            CHECK(f.payload_length == payload_len);
            CHECK(payload_len == 0 || memcmp(out + head, payload, payload_len) == 0);
        }
    } else {
        out_len = param;
        out = malloc(out_len ? out_len : 1);
        CHECK(out != NULL);
        status = srpc_seal(kind, is_signed, key, sig, payload, payload_len, out, out_len, &err);
        if (status < 0) {
            check_error(status, &err);
        } else {
            srpc_frame f;
            CHECK(srpc_open(out, out_len, out_len, 1, kind, NULL, NULL, 0, &f, NULL) == SRPC_OK);
            CHECK(f.is_signed == is_signed && f.payload_length == payload_len);
            CHECK(payload_len == 0 || memcmp(out + f.payload_offset, payload, payload_len) == 0);
            if (is_signed) {
                CHECK(memcmp(out + f.key_offset, key, SRPC_SPKI_LENGTH) == 0);
                CHECK(memcmp(out + f.sig_offset, sig, SRPC_SIGNATURE_LENGTH) == 0);
            }
        }
    }
    free(out);
    free(payload);
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
    case OP_FRAME_DECODE: fuzz_frame_decode(data, size); break;
    case OP_OPEN: fuzz_open(flags, param, data, size); break;
    case OP_PAD: fuzz_pad(flags, param, data, size); break;
    case OP_SEAL: fuzz_seal(flags, param, data, size, 0); break;
    case OP_PAD_MANY: fuzz_pad_many(flags, param, data, size); break;
    default: fuzz_seal(flags, param, data, size, 1); break;
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
