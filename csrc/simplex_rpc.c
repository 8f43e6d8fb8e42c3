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
    /* Every payload is checked, in order, before anything is written. */
    for (i = 0; i < count; i++) {
        if (lens[i] > src_len - at || head_len > SIZE_MAX - lens[i]) {
            return fail(err, SRPC_E_ARGUMENT, 0, lens[i], src_len - at);
        }
        status = check_pad(head_len + lens[i], length, err);
        if (status != SRPC_OK) {
            if (err != NULL) {
                err->index = i;
            }
            return status;
        }
        at += lens[i];
    }
    if (at != src_len) {
        return fail(err, SRPC_E_ARGUMENT, 0, at, src_len);
    }
    /* The fill of every block in one memset (one large memset stores faster than a
     * thousand small ones), then each block's length field, head and payload over it:
     * the same bytes as srpc_seal_parts block by block. */
    if (count != 0) {
        memset(out, SRPC_FILL, out_len);
    }
    at = 0;
    for (i = 0; i < count; i++) {
        unsigned char *block = out + i * length;
        size_t msg_len = head_len + lens[i];
        block[0] = (unsigned char)(msg_len >> 8);
        block[1] = (unsigned char)(msg_len & 0xffu);
        copy_bytes(block + 2, head, head_len);
        copy_bytes(block + 2 + head_len, lens[i] != 0 ? src + at : NULL, lens[i]);
        at += lens[i];
    }
    return SRPC_OK;
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

/* ---- the request's head (see simplex_rpc.h) ------------------------------
 * V8 = simplexmq 22815214468d4eb79a5e98df7a1ba2daa5d07ad7,
 * src/Simplex/Messaging/Agent/Protocol.hs. Each reader below returns 0 and
 * leaves the cursor unspecified when the bytes are not the usual head; the
 * caller then defers to the codec, which reads them again and words the
 * error, if there is one. */

_Static_assert(SRPC_HEAD_RESULT_LENGTH == 4 + SRPC_HEAD_QUEUE_FIELDS * SRPC_HEAD_QUEUES,
               "the result layout of srpc_request_head");

/* RFC 8410 DER prefixes of the 44-byte SubjectPublicKeyInfo: X25519 (OID
 * 1.3.101.110), the queue's DH key, and Ed25519 (1.3.101.112), the signer's key
 * (V8 `RequestSignature PublicKeyEd25519`; Crypto.hs encodes keys as X.509). */
static const unsigned char X25519_SPKI[12] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03,
                                              0x2b, 0x65, 0x6e, 0x03, 0x21, 0x00};
static const unsigned char ED25519_SPKI[12] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03,
                                               0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};

typedef struct head_cursor {
    const unsigned char *msg;
    size_t at;
    size_t stop;
} head_cursor;

/* Encoding.hs `instance Encoding ByteString`: a length byte, then the bytes.
 * Sets *start and *len; 0 when it does not fit before stop. */
static int read_bytestring(head_cursor *c, size_t *start, size_t *len)
{
    size_t n;
    if (c->at >= c->stop) {
        return 0;
    }
    n = c->msg[c->at];
    if (n > c->stop - c->at - 1) {
        return 0;
    }
    *start = c->at + 1;
    *len = n;
    c->at += 1 + n;
    return 1;
}

static int is_lower_or_dash(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || ch == '-';
}

static int is_label_char(unsigned char ch)
{
    return is_lower_or_dash(ch) || (ch >= '0' && ch <= '9');
}

/* A plain domain name, as _wire/agent_block.py's _PLAIN_DOMAIN reads it:
 * labels of [a-z0-9-] separated by single dots, the first with a letter or a
 * dash (so not an IPv4 address), no colon (so not IPv6), and no ".onion"
 * anywhere. Transport/Client.hs (master) `strP` of TransportHost then reads
 * it as a domain, and prints it back as the same text. */
static int plain_domain(const unsigned char *s, size_t n)
{
    size_t i = 0, label;
    int letter = 0;

    for (; i < n && s[i] != '.'; i++) {
        if (is_lower_or_dash(s[i])) {
            letter = 1;
        } else if (!is_label_char(s[i])) {
            return 0;
        }
    }
    if (!letter) {
        return 0; /* empty, or only digits before the first dot */
    }
    while (i < n) { /* s[i] == '.' */
        label = ++i;
        for (; i < n && s[i] != '.'; i++) {
            if (!is_label_char(s[i])) {
                return 0;
            }
        }
        if (i == label) {
            return 0;
        }
    }
    for (i = 0; n >= 6 && i <= n - 6; i++) {
        if (memcmp(s + i, ".onion", 6) == 0) {
            return 0;
        }
    }
    return 1;
}

/* Protocol.hs (master) `ProtocolServer` smpEncode: NonEmpty hosts (each a
 * ByteString of strEncoded TransportHost), the port (a ByteString, "" or a
 * decimal of 1 to 65535 without a leading zero: the codec's _check_port),
 * the key hash (a ByteString). */
static int read_server(head_cursor *c)
{
    size_t count, i, start, len, port = 0;

    if (c->at >= c->stop) {
        return 0;
    }
    count = c->msg[c->at++];
    if (count == 0) {
        return 0; /* NonEmpty refuses 0: the codec's error */
    }
    for (i = 0; i < count; i++) {
        if (!read_bytestring(c, &start, &len) || !plain_domain(c->msg + start, len)) {
            return 0;
        }
    }
    if (!read_bytestring(c, &start, &len) || len > 5 || (len != 0 && c->msg[start] == '0')) {
        return 0;
    }
    for (i = 0; i < len; i++) {
        unsigned char ch = c->msg[start + i];
        if (ch < '0' || ch > '9') {
            return 0;
        }
        port = port * 10 + (size_t)(ch - '0');
    }
    if (port > 65535) {
        return 0;
    }
    return read_bytestring(c, &start, &len); /* the key hash: any bytes */
}

/* V8 `instance Encoding SMPQueueInfo`, for client versions from 2 (version 1
 * has the legacy server encoding and updateSMPServerHosts: the codec's). The
 * queue mode (`queueModeP`) is read as the codec reads it: only the byte
 * smpEncode writes for the version ('M'/'C' from shortLinksSMPClientVersion 4,
 * 'T' for True at sndAuthKeySMPClientVersion 3); any other 'M', 'C', 'T' or 'F'
 * is the codec's error. */
static int read_queue(head_cursor *c, size_t *fields)
{
    size_t start = c->at, sender_at, dh_at, id, len;
    unsigned int version;
    int mode = 0;

    if (c->stop - c->at < 2) {
        return 0;
    }
    version = ((unsigned int)c->msg[c->at] << 8) | c->msg[c->at + 1];
    if (version < 2) {
        return 0;
    }
    c->at += 2;
    if (!read_server(c)) {
        return 0;
    }
    sender_at = c->at;
    if (!read_bytestring(c, &id, &len)) {
        return 0;
    }
    dh_at = c->at;
    if (!read_bytestring(c, &id, &len) || len != SRPC_SPKI_LENGTH
        || memcmp(c->msg + id, X25519_SPKI, sizeof X25519_SPKI) != 0) {
        return 0;
    }
    if (c->at < c->stop) {
        unsigned char b = c->msg[c->at];
        if (b == 'M' || b == 'C' || b == 'T' || b == 'F') {
            if (version >= 4 && (b == 'M' || b == 'C')) {
                mode = b;
            } else if (version == 3 && b == 'T') {
                mode = 'M';
            } else {
                return 0;
            }
            c->at++;
        }
    }
    fields[0] = start;
    fields[1] = sender_at;
    fields[2] = dh_at;
    fields[3] = c->at;
    fields[4] = version;
    fields[5] = (size_t)mode;
    return 1;
}

int srpc_request_head(const unsigned char *msg, size_t msg_len, size_t base, size_t *res,
                      size_t res_len)
{
    head_cursor c;
    size_t count, i, at;

    if ((msg == NULL && msg_len != 0) || res == NULL || res_len < SRPC_HEAD_RESULT_LENGTH
        || base > SIZE_MAX - msg_len) {
        return SRPC_E_ARGUMENT;
    }
    res[0] = msg_len;
    /* 'A', then the NonEmpty count (1 to 255; 0 is the codec's error). */
    if (msg_len < 2 || msg[0] != 'A' || msg[1] == 0 || msg[1] > SRPC_HEAD_QUEUES) {
        return SRPC_HEAD_DEFER;
    }
    count = msg[1];
    c.msg = msg;
    c.at = 2;
    c.stop = msg_len;
    for (i = 0; i < count; i++) {
        size_t *fields = res + 4 + i * SRPC_HEAD_QUEUE_FIELDS;
        size_t k;
        if (!read_queue(&c, fields)) {
            return SRPC_HEAD_DEFER;
        }
        for (k = 0; k < 4; k++) {
            fields[k] += base;
        }
    }
    /* Encoding.hs `Maybe`: '0', or '1' then the RequestSignature: the key
     * (ByteString of 44 bytes of Ed25519 SPKI) and the signature (ByteString
     * of 64 bytes). */
    at = c.at;
    if (at >= msg_len) {
        return SRPC_HEAD_DEFER;
    }
    if (msg[at] == '0') {
        res[1] = base + at + 1;
        res[2] = 0;
    } else if (msg[at] == '1' && msg_len - at >= 1 + 1 + SRPC_SPKI_LENGTH + 1 + SRPC_SIGNATURE_LENGTH
               && msg[at + 1] == SRPC_SPKI_LENGTH
               && memcmp(msg + at + 2, ED25519_SPKI, sizeof ED25519_SPKI) == 0
               && msg[at + 2 + SRPC_SPKI_LENGTH] == SRPC_SIGNATURE_LENGTH) {
        res[1] = base + at + 1 + 1 + SRPC_SPKI_LENGTH + 1 + SRPC_SIGNATURE_LENGTH;
        res[2] = base + at + 2 + sizeof ED25519_SPKI;
    } else {
        return SRPC_HEAD_DEFER;
    }
    res[3] = count;
    return SRPC_OK;
}

int srpc_open_request(const unsigned char *block, size_t size, int strict,
                      const unsigned char *tag, unsigned char *sm, size_t sm_len,
                      size_t *res, size_t res_len, srpc_error *err)
{
    int n, status;
    size_t end, payload_len;

    if (res == NULL || res_len < SRPC_HEAD_RESULT_LENGTH || (sm != NULL && tag == NULL)) {
        return fail(err, SRPC_E_ARGUMENT, 0, res_len, SRPC_HEAD_RESULT_LENGTH);
    }
    n = srpc_unpad(block, size, 1, SRPC_PADDED_LENGTH, strict, err);
    if (n < 0) {
        return n;
    }
    status = srpc_request_head(block + 2, (size_t)n, 2, res, res_len);
    if (status != SRPC_OK || res[2] == 0 || sm == NULL) {
        return status;
    }
    end = 2 + (size_t)n;
    payload_len = end - res[1];
    if (payload_len > SIZE_MAX - SRPC_SIGNATURE_LENGTH - SRPC_TAG_LENGTH
        || sm_len < SRPC_SIGNATURE_LENGTH + SRPC_TAG_LENGTH + payload_len) {
        return fail(err, SRPC_E_ARGUMENT, 0, sm_len, payload_len);
    }
    return srpc_signed_message(block + res[1] - SRPC_SIGNATURE_LENGTH, tag, block + res[1],
                               payload_len, sm, SRPC_SIGNATURE_LENGTH + SRPC_TAG_LENGTH
                               + payload_len);
}

int srpc_copy(unsigned char *dst, size_t dst_len, const unsigned char *src, size_t n)
{
    if (n > dst_len || (n != 0 && (dst == NULL || src == NULL))) {
        return SRPC_E_ARGUMENT;
    }
    copy_bytes(dst, src, n);
    return SRPC_OK;
}
