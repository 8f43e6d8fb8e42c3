/*
 * simplex-rpc C core; see simplex_rpc.h for the contract.
 *
 * Every check mirrors the pure-Python backend (src/simplex_rpc/_wire/padding.py
 * and seal.py) in the same order, so that both report the same first
 * error for the same input.
 */
#include "simplex_rpc.h"

#include <limits.h>
#include <string.h>

/* srpc_unpad returns a 16-bit length as int. */
_Static_assert(INT_MAX >= 0xffff, "int must hold a 16-bit length");

#define SRPC_FILL ((unsigned char)0x23) /* '#' */

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

/* ---- the agent's Service RPC block (wire.md section 4) ------------------
 * The message's fields are encoded and decoded by one definition, the
 * pure-Python codec (_wire/agent_block.py); C builds the padded block around
 * them in one pass and lays out the signed message for libsodium. */

int srpc_seal_parts(const unsigned char *head, size_t head_len,
                    const unsigned char *payload, size_t payload_len,
                    unsigned char *block, size_t length, srpc_error *err)
{
    size_t msg_len;
    int status;

    if ((head == NULL && head_len != 0) || (payload == NULL && payload_len != 0)
        || head_len > SIZE_MAX - payload_len) {
        return fail(err, SRPC_E_ARGUMENT, 0, payload_len, 0);
    }
    msg_len = head_len + payload_len;
    status = check_pad(msg_len, length, err);
    if (status != SRPC_OK) {
        return status;
    }
    if (block == NULL) {
        return fail(err, SRPC_E_ARGUMENT, 0, 0, length);
    }
    block[0] = (unsigned char)(msg_len >> 8);
    block[1] = (unsigned char)(msg_len & 0xffu);
    copy_bytes(block + 2, head, head_len);
    copy_bytes(block + 2 + head_len, payload, payload_len);
    memset(block + 2 + msg_len, SRPC_FILL, length - 2 - msg_len);
    return SRPC_OK;
}

int srpc_seal_parts_many(const unsigned char *head, size_t head_len,
                         const unsigned char *src, size_t src_len, const size_t *lens,
                         size_t count, size_t length, unsigned char *out, size_t out_len,
                         srpc_error *err)
{
    size_t i, at = 0;
    int status;

    if ((head == NULL && head_len != 0) || (count != 0 && (lens == NULL || out == NULL))
        || (src == NULL && src_len != 0) || (count != 0 && length > SIZE_MAX / count)
        || out_len != count * length) {
        return fail(err, SRPC_E_ARGUMENT, 0, count, length);
    }
    for (i = 0; i < count; i++) {
        if (lens[i] > src_len - at) {
            return fail(err, SRPC_E_ARGUMENT, 0, lens[i], src_len - at);
        }
        status = srpc_seal_parts(head, head_len, src + at, lens[i], out + i * length, length,
                                 err);
        if (status != SRPC_OK) {
            if (err != NULL) {
                err->index = i;
            }
            return status;
        }
        at += lens[i];
    }
    return at == src_len ? SRPC_OK : fail(err, SRPC_E_ARGUMENT, 0, at, src_len);
}

int srpc_seal_signed_begin(const unsigned char *tag, const unsigned char *payload,
                           size_t payload_len, size_t payload_at, unsigned char *block,
                           size_t length, srpc_error *err)
{
    size_t msg_len;
    int status;

    if (tag == NULL || (payload == NULL && payload_len != 0)
        || payload_at < SRPC_SIGN_MIN_PAYLOAD_AT || payload_len > SIZE_MAX - payload_at) {
        return fail(err, SRPC_E_ARGUMENT, 0, payload_len, payload_at);
    }
    msg_len = payload_at - 2 + payload_len;
    status = check_pad(msg_len, length, err);
    if (status != SRPC_OK) {
        return status;
    }
    if (block == NULL) {
        return fail(err, SRPC_E_ARGUMENT, 0, 0, length);
    }
    block[0] = (unsigned char)(msg_len >> 8);
    block[1] = (unsigned char)(msg_len & 0xffu);
    copy_bytes(block + payload_at, payload, payload_len);
    memset(block + 2 + msg_len, SRPC_FILL, length - 2 - msg_len);
    memcpy(block + payload_at - SRPC_TAG_LENGTH, tag, SRPC_TAG_LENGTH);
    return SRPC_OK;
}

int srpc_seal_signed_end(const unsigned char *head, size_t head_len, unsigned char *block,
                         size_t length, size_t payload_at)
{
    if (head == NULL || block == NULL || payload_at < SRPC_SIGN_MIN_PAYLOAD_AT
        || payload_at > length || head_len != payload_at - 2 - SRPC_SIGNATURE_LENGTH) {
        return SRPC_E_ARGUMENT;
    }
    /* crypto_sign wrote the signature 96 bytes before the payload; it belongs
     * right before the payload, after its length byte (the last of head). */
    memmove(block + payload_at - SRPC_SIGNATURE_LENGTH,
            block + payload_at - SRPC_SIGNATURE_LENGTH - SRPC_TAG_LENGTH,
            SRPC_SIGNATURE_LENGTH);
    memcpy(block + 2, head, head_len);
    return SRPC_OK;
}

int srpc_signed_message(const unsigned char *sig, const unsigned char *tag,
                        const unsigned char *payload, size_t payload_len,
                        unsigned char *sm, size_t sm_len)
{
    if (sig == NULL || tag == NULL || sm == NULL || (payload == NULL && payload_len != 0)
        || payload_len > SIZE_MAX - SRPC_SIGNATURE_LENGTH - SRPC_TAG_LENGTH
        || sm_len != SRPC_SIGNATURE_LENGTH + SRPC_TAG_LENGTH + payload_len) {
        return SRPC_E_ARGUMENT;
    }
    memcpy(sm, sig, SRPC_SIGNATURE_LENGTH);
    memcpy(sm + SRPC_SIGNATURE_LENGTH, tag, SRPC_TAG_LENGTH);
    copy_bytes(sm + SRPC_SIGNATURE_LENGTH + SRPC_TAG_LENGTH, payload, payload_len);
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
