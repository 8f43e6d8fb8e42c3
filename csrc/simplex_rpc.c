/*
 * simplex-rpc C core; see simplex_rpc.h for the contract.
 *
 * Every check mirrors the pure-Python backend (src/simplex_rpc/_wire/padding.py
 * and frame.py) in the same order, so that both report the same first
 * error for the same input.
 */
#include "simplex_rpc.h"

#include <limits.h>
#include <string.h>

/* srpc_unpad returns a 16-bit length as int. */
_Static_assert(INT_MAX >= 0xffff, "int must hold a 16-bit length");

#define SRPC_FILL ((unsigned char)0x23) /* '#' */
#define SRPC_TAG_REQUEST ((unsigned char)0x52) /* 'R' */
#define SRPC_TAG_RESPONSE ((unsigned char)0x53) /* 'S' */
#define SRPC_UNSIGNED ((unsigned char)0x30) /* '0' */
#define SRPC_SIGNED ((unsigned char)0x31) /* '1' */

/* Offsets inside a frame (not a padded block). */
#define SRPC_OFF_KEY_LENGTH 4
#define SRPC_OFF_KEY 5
#define SRPC_OFF_SIG_LENGTH (SRPC_OFF_KEY + SRPC_SPKI_LENGTH)  /* 49 */
#define SRPC_OFF_SIG (SRPC_OFF_SIG_LENGTH + 1)                 /* 50 */

/* RFC 8410: the DER of an Ed25519 SubjectPublicKeyInfo before the key. */
static const unsigned char spki_prefix[SRPC_SPKI_PREFIX_LENGTH] = {
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
};

static int fail(srpc_error *err, int status, size_t offset, size_t value,
                size_t bound)
{
    if (err != NULL) {
        err->status = status;
        err->index = 0;
        err->offset = offset;
        err->value = value;
        err->bound = bound;
    }
    return status;
}

/* memcpy that accepts a NULL source for zero bytes (memcpy itself may not). */
static void copy_bytes(unsigned char *dst, const unsigned char *src, size_t n)
{
    if (n != 0) {
        memcpy(dst, src, n);
    }
}

/* ---- padding (wire.md section 5) ------------------------------------- */

/* The checks of pad, in the pure backend's order (check_pad). */
static int check_pad(size_t msg_len, size_t length, srpc_error *err)
{
    if (length < 2) {
        return fail(err, SRPC_E_PAD_BLOCK_LENGTH, 0, msg_len, length);
    }
    if (msg_len > (size_t)SRPC_MAX_MESSAGE_LENGTH) {
        return fail(err, SRPC_E_PAD_MESSAGE_MAX, 0, msg_len, length);
    }
    if (msg_len > length - 2) {
        return fail(err, SRPC_E_PAD_MESSAGE_FIT, 0, msg_len, length);
    }
    return SRPC_OK;
}

/* Write a checked message into a block of `length` bytes. */
static void write_padded(const unsigned char *msg, size_t msg_len, unsigned char *out,
                         size_t length)
{
    out[0] = (unsigned char)(msg_len >> 8);
    out[1] = (unsigned char)(msg_len & 0xffu);
    copy_bytes(out + 2, msg, msg_len);
    memset(out + 2 + msg_len, SRPC_FILL, length - 2 - msg_len);
}

int srpc_pad(const unsigned char *msg, size_t msg_len, size_t length, unsigned char *out,
             size_t out_len, srpc_error *err)
{
    int status = check_pad(msg_len, length, err);
    if (status != SRPC_OK) {
        return status;
    }
    if ((msg == NULL && msg_len != 0) || out == NULL || out_len != length) {
        return fail(err, SRPC_E_ARGUMENT, 0, out_len, length);
    }
    write_padded(msg, msg_len, out, length);
    return SRPC_OK;
}

int srpc_unpad(const unsigned char *block, size_t size, int exact, size_t length,
               int strict, srpc_error *err)
{
    size_t n;
    size_t i;

    if (exact && size != length) {
        return fail(err, SRPC_E_UNPAD_BLOCK_SIZE, 0, size, length);
    }
    if (size < 2) {
        return fail(err, SRPC_E_UNPAD_SHORT, 0, size, 2);
    }
    if (block == NULL) {
        return fail(err, SRPC_E_ARGUMENT, 0, size, 0);
    }
    n = ((size_t)block[0] << 8) | (size_t)block[1];
    if (n > size - 2) {
        return fail(err, SRPC_E_UNPAD_LENGTH_FIELD, 0, n, size - 2);
    }
    if (strict) {
        for (i = 2 + n; i < size; i++) {
            if (block[i] != SRPC_FILL) {
                return fail(err, SRPC_E_UNPAD_FILL, i, block[i], 0);
            }
        }
    }
    return (int)n; /* n <= 0xffff */
}

int srpc_pad_many(const unsigned char *src, size_t src_len, const size_t *lens,
                  size_t count, size_t length, unsigned char *out, size_t out_len,
                  srpc_error *err)
{
    size_t i;
    size_t total = 0;
    size_t at = 0;

    if (count != 0 && lens == NULL) {
        return fail(err, SRPC_E_ARGUMENT, 0, count, 0);
    }
    /* Every message is checked, in order, before anything is written. */
    for (i = 0; i < count; i++) {
        int status = check_pad(lens[i], length, err);
        if (status != SRPC_OK) {
            if (err != NULL) {
                err->index = i;
            }
            return status;
        }
        /* lens[i] <= 65533, so the sum overflows only after 2^48 messages;
         * checked all the same. */
        if (lens[i] > SIZE_MAX - total) {
            return fail(err, SRPC_E_ARGUMENT, 0, i, 0);
        }
        total += lens[i];
    }
    if (total != src_len || (src == NULL && src_len != 0)) {
        return fail(err, SRPC_E_ARGUMENT, 0, src_len, total);
    }
    if (count != 0 && (length > SIZE_MAX / count || out_len != count * length
                       || out == NULL)) {
        return fail(err, SRPC_E_ARGUMENT, 0, out_len, length);
    }
    for (i = 0; i < count; i++) {
        /* src may be NULL when every message is empty: no arithmetic on it then. */
        write_padded(lens[i] != 0 ? src + at : NULL, lens[i], out + i * length, length);
        at += lens[i];
    }
    return SRPC_OK;
}

int srpc_unpad_many(const unsigned char *buf, size_t buf_len, size_t length,
                    int strict, size_t *msg_lens, size_t count,
                    srpc_error *err)
{
    size_t i;

    if (length < 2) {
        return fail(err, SRPC_E_BATCH_BLOCK_LENGTH, 0, length, 2);
    }
    if (buf_len % length != 0) {
        return fail(err, SRPC_E_BATCH_SHAPE, 0, buf_len, length);
    }
    if (count != buf_len / length || (count != 0 && (buf == NULL || msg_lens == NULL))) {
        return fail(err, SRPC_E_ARGUMENT, 0, count, buf_len / length);
    }
    for (i = 0; i < count; i++) {
        int n = srpc_unpad(buf + i * length, length, 0, 0, strict, err);
        if (n < 0) {
            if (err != NULL) {
                err->index = i;
            }
            return n;
        }
        msg_lens[i] = (size_t)n;
    }
    return SRPC_OK;
}

/* ---- frame (wire.md section 4) ---------------------------------------- */

/* Fill in a decoded frame's layout; the caller has checked size >= overhead. */
static int set_layout(srpc_frame *out, int kind, int is_signed, size_t overhead,
                      size_t size)
{
    out->kind = kind;
    out->is_signed = is_signed;
    out->key_offset = is_signed ? SRPC_OFF_KEY : 0;
    out->sig_offset = is_signed ? SRPC_OFF_SIG : 0;
    out->payload_offset = overhead;
    out->payload_length = size - overhead;
    return SRPC_OK;
}

int srpc_frame_decode(const unsigned char *frame, size_t size, srpc_frame *out,
                      srpc_error *err)
{
    size_t version;
    size_t i;

    if (size < 2) {
        return fail(err, SRPC_E_FRAME_NO_VERSION, size, size, 2);
    }
    if (frame == NULL || out == NULL) {
        return fail(err, SRPC_E_ARGUMENT, 0, size, 0);
    }
    version = ((size_t)frame[0] << 8) | (size_t)frame[1];
    if (version != SRPC_FRAME_VERSION) {
        return fail(err, SRPC_E_FRAME_VERSION, 0, version, SRPC_FRAME_VERSION);
    }
    if (size < 3) {
        return fail(err, SRPC_E_FRAME_NO_TAG, 2, size, 3);
    }
    if (frame[2] == SRPC_TAG_RESPONSE) {
        return set_layout(out, SRPC_RESPONSE, 0, SRPC_RESPONSE_OVERHEAD, size);
    }
    if (frame[2] != SRPC_TAG_REQUEST) {
        return fail(err, SRPC_E_FRAME_TAG, 2, frame[2], 0);
    }
    if (size < 4) {
        return fail(err, SRPC_E_FRAME_NO_SIGNER, 3, size, 4);
    }
    if (frame[3] == SRPC_UNSIGNED) {
        return set_layout(out, SRPC_REQUEST, 0, SRPC_UNSIGNED_REQUEST_OVERHEAD, size);
    }
    if (frame[3] != SRPC_SIGNED) {
        return fail(err, SRPC_E_FRAME_SIGNER, 3, frame[3], 0);
    }
    if (size <= SRPC_OFF_KEY_LENGTH) {
        return fail(err, SRPC_E_FRAME_NO_KEY_LENGTH, SRPC_OFF_KEY_LENGTH, size,
                    SRPC_OFF_KEY_LENGTH + 1);
    }
    if (frame[SRPC_OFF_KEY_LENGTH] != SRPC_SPKI_LENGTH) {
        return fail(err, SRPC_E_FRAME_KEY_LENGTH, SRPC_OFF_KEY_LENGTH,
                    frame[SRPC_OFF_KEY_LENGTH], SRPC_SPKI_LENGTH);
    }
    /* The prefix bytes that are there are checked before the length. */
    for (i = 0; i < SRPC_SPKI_PREFIX_LENGTH && SRPC_OFF_KEY + i < size; i++) {
        if (frame[SRPC_OFF_KEY + i] != spki_prefix[i]) {
            return fail(err, SRPC_E_FRAME_KEY_PREFIX, SRPC_OFF_KEY + i,
                        frame[SRPC_OFF_KEY + i], spki_prefix[i]);
        }
    }
    if (size < SRPC_OFF_SIG_LENGTH) {
        return fail(err, SRPC_E_FRAME_IN_KEY, size, size, SRPC_OFF_SIG_LENGTH);
    }
    if (size == SRPC_OFF_SIG_LENGTH) {
        return fail(err, SRPC_E_FRAME_NO_SIG_LENGTH, SRPC_OFF_SIG_LENGTH, size,
                    SRPC_OFF_SIG_LENGTH + 1);
    }
    if (frame[SRPC_OFF_SIG_LENGTH] != SRPC_SIGNATURE_LENGTH) {
        return fail(err, SRPC_E_FRAME_SIG_LENGTH, SRPC_OFF_SIG_LENGTH,
                    frame[SRPC_OFF_SIG_LENGTH], SRPC_SIGNATURE_LENGTH);
    }
    if (size < SRPC_SIGNED_REQUEST_OVERHEAD) {
        return fail(err, SRPC_E_FRAME_IN_SIG, size, size, SRPC_SIGNED_REQUEST_OVERHEAD);
    }
    return set_layout(out, SRPC_REQUEST, 1, SRPC_SIGNED_REQUEST_OVERHEAD, size);
}

size_t srpc_frame_head_length(int kind, int is_signed)
{
    if (kind == SRPC_RESPONSE && !is_signed) {
        return SRPC_RESPONSE_OVERHEAD;
    }
    if (kind == SRPC_REQUEST) {
        return is_signed ? SRPC_SIGNED_REQUEST_OVERHEAD
                         : SRPC_UNSIGNED_REQUEST_OVERHEAD;
    }
    return 0;
}

/* Check the arguments of a frame head; return its length, or 0. */
static size_t check_head(int kind, int is_signed, const unsigned char *key_der,
                         const unsigned char *sig)
{
    size_t head = srpc_frame_head_length(kind, is_signed);

    if (head == 0) {
        return 0;
    }
    if (is_signed) {
        if (key_der == NULL || sig == NULL
            || memcmp(key_der, spki_prefix, SRPC_SPKI_PREFIX_LENGTH) != 0) {
            return 0;
        }
    }
    return head;
}

/* Write the fields of a checked frame head, all but the signature bytes. */
static void write_head_fields(int kind, int is_signed, const unsigned char *key_der,
                              unsigned char *out)
{
    out[0] = (unsigned char)(SRPC_FRAME_VERSION >> 8);
    out[1] = (unsigned char)(SRPC_FRAME_VERSION & 0xff);
    if (kind == SRPC_RESPONSE) {
        out[2] = SRPC_TAG_RESPONSE;
        return;
    }
    out[2] = SRPC_TAG_REQUEST;
    if (!is_signed) {
        out[3] = SRPC_UNSIGNED;
        return;
    }
    out[3] = SRPC_SIGNED;
    out[SRPC_OFF_KEY_LENGTH] = SRPC_SPKI_LENGTH;
    memcpy(out + SRPC_OFF_KEY, key_der, SRPC_SPKI_LENGTH);
    out[SRPC_OFF_SIG_LENGTH] = SRPC_SIGNATURE_LENGTH;
}

/* Write a checked frame head. */
static void write_head(int kind, int is_signed, const unsigned char *key_der,
                       const unsigned char *sig, unsigned char *out)
{
    write_head_fields(kind, is_signed, key_der, out);
    if (kind == SRPC_REQUEST && is_signed) {
        memcpy(out + SRPC_OFF_SIG, sig, SRPC_SIGNATURE_LENGTH);
    }
}

int srpc_frame_encode(int kind, int is_signed, const unsigned char *key_der,
                      const unsigned char *sig, const unsigned char *payload,
                      size_t payload_len, unsigned char *out, size_t out_len,
                      srpc_error *err)
{
    size_t head = check_head(kind, is_signed, key_der, sig);

    if (head == 0 || out == NULL || (payload == NULL && payload_len != 0)
        || payload_len > SIZE_MAX - head || out_len != head + payload_len) {
        return fail(err, SRPC_E_ARGUMENT, 0, out_len, head);
    }
    write_head(kind, is_signed, key_der, sig, out);
    copy_bytes(out + head, payload, payload_len);
    return SRPC_OK;
}

int srpc_seal(int kind, int is_signed, const unsigned char *key_der,
              const unsigned char *sig, const unsigned char *payload, size_t payload_len,
              unsigned char *block, size_t length, srpc_error *err)
{
    size_t head = check_head(kind, is_signed, key_der, sig);
    size_t frame_len;
    int status;

    if (head == 0 || (payload == NULL && payload_len != 0)
        || payload_len > SIZE_MAX - head) {
        return fail(err, SRPC_E_ARGUMENT, 0, payload_len, head);
    }
    frame_len = head + payload_len;
    status = check_pad(frame_len, length, err);
    if (status != SRPC_OK) {
        return status;
    }
    if (block == NULL) {
        return fail(err, SRPC_E_ARGUMENT, 0, 0, length);
    }
    block[0] = (unsigned char)(frame_len >> 8);
    block[1] = (unsigned char)(frame_len & 0xffu);
    write_head(kind, is_signed, key_der, sig, block + 2);
    copy_bytes(block + 2 + head, payload, payload_len);
    memset(block + 2 + frame_len, SRPC_FILL, length - 2 - frame_len);
    return SRPC_OK;
}

int srpc_open(const unsigned char *block, size_t size, size_t length, int strict,
              int expect, const unsigned char *tag, unsigned char *sm, size_t sm_len,
              srpc_frame *out, srpc_error *err)
{
    int n;
    int status;

    if (out == NULL
        || (expect != SRPC_ANY && expect != SRPC_REQUEST && expect != SRPC_RESPONSE)) {
        return fail(err, SRPC_E_ARGUMENT, 0, 0, 0);
    }
    n = srpc_unpad(block, size, 1, length, strict, err);
    if (n < 0) {
        return n;
    }
    status = srpc_frame_decode(block + 2, (size_t)n, out, err);
    if (status != SRPC_OK) {
        return status;
    }
    if (expect == SRPC_REQUEST && out->kind != SRPC_REQUEST) {
        return fail(err, SRPC_E_FRAME_NOT_REQUEST, 2, 0, 0);
    }
    if (expect == SRPC_RESPONSE && out->kind != SRPC_RESPONSE) {
        return fail(err, SRPC_E_FRAME_NOT_RESPONSE, 2, 0, 0);
    }
    out->key_offset += 2;
    out->sig_offset += 2;
    out->payload_offset += 2;
    if (out->is_signed && tag != NULL) {
        /* payload_length <= 0xffff - 114, so this sum cannot overflow. */
        size_t need = SRPC_SIGNATURE_LENGTH + SRPC_TAG_LENGTH + out->payload_length;
        if (sm == NULL || sm_len < need) {
            return fail(err, SRPC_E_ARGUMENT, 0, sm_len, need);
        }
        memcpy(sm, block + out->sig_offset, SRPC_SIGNATURE_LENGTH);
        memcpy(sm + SRPC_SIGNATURE_LENGTH, tag, SRPC_TAG_LENGTH);
        copy_bytes(sm + SRPC_SIGNATURE_LENGTH + SRPC_TAG_LENGTH,
                   block + out->payload_offset, out->payload_length);
    }
    return SRPC_OK;
}

int srpc_seal_signed_begin(const unsigned char *tag, const unsigned char *payload,
                           size_t payload_len, unsigned char *block, size_t length,
                           srpc_error *err)
{
    size_t frame_len;
    int status;

    if (tag == NULL || (payload == NULL && payload_len != 0)
        || payload_len > SIZE_MAX - SRPC_SIGNED_REQUEST_OVERHEAD) {
        return fail(err, SRPC_E_ARGUMENT, 0, payload_len, 0);
    }
    frame_len = SRPC_SIGNED_REQUEST_OVERHEAD + payload_len;
    status = check_pad(frame_len, length, err);
    if (status != SRPC_OK) {
        return status;
    }
    if (block == NULL) {
        return fail(err, SRPC_E_ARGUMENT, 0, 0, length);
    }
    block[0] = (unsigned char)(frame_len >> 8);
    block[1] = (unsigned char)(frame_len & 0xffu);
    copy_bytes(block + SRPC_PAYLOAD_AT, payload, payload_len);
    memset(block + 2 + frame_len, SRPC_FILL, length - 2 - frame_len);
    memcpy(block + SRPC_SIGN_M_AT, tag, SRPC_TAG_LENGTH);
    return SRPC_OK;
}

int srpc_seal_signed_end(const unsigned char *key_der, unsigned char *block,
                         size_t length)
{
    if (key_der == NULL || block == NULL || length < SRPC_PAYLOAD_AT
        || memcmp(key_der, spki_prefix, SRPC_SPKI_PREFIX_LENGTH) != 0) {
        return SRPC_E_ARGUMENT;
    }
    /* 2 + the signature's frame offset is where it belongs: 52. */
    memmove(block + 2 + SRPC_OFF_SIG, block + SRPC_SIGN_SM_AT, SRPC_SIGNATURE_LENGTH);
    write_head_fields(SRPC_REQUEST, 1, key_der, block + 2);
    return SRPC_OK;
}

int srpc_copy(unsigned char *dst, size_t dst_len, const unsigned char *src, size_t n)
{
    if (n > dst_len || (n != 0 && (dst == NULL || src == NULL))) {
        return SRPC_E_ARGUMENT;
    }
    copy_bytes(dst, src, n);
    return SRPC_OK;
}
