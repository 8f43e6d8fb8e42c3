/*
 * simplex-rpc C core: SimpleX padding and the simplex-rpc frame
 * (wire.md sections 4 and 5), with batch forms over one contiguous buffer.
 *
 * Contract of every function here:
 *   - C11, no Python objects, no allocation, no global mutable state.
 *   - Every length is checked before use; size arithmetic never overflows.
 *   - The return value is a non-negative result (SRPC_OK, or a length where
 *     the function says so) or a negative status, one SRPC_E_* code. When
 *     `err` is not NULL, a failure also fills it with the details the Python
 *     wrapper needs to build the same message as the pure backend; the
 *     wrapper passes NULL on its fast path and asks again only on failure.
 *   - Offsets in srpc_frame are relative to the buffer passed in; offsets in
 *     srpc_error for frame errors are relative to the frame (as in the pure
 *     backend's messages).
 *
 * This file is read both by the C compiler and by cffi's cdef (the build
 * script drops the preprocessor lines), so it holds declarations only.
 */
#ifndef SIMPLEX_RPC_H
#define SIMPLEX_RPC_H

#include <stddef.h>
#include <stdint.h>

enum {
    SRPC_PADDED_LENGTH = 11106,
    SRPC_MAX_MESSAGE_LENGTH = 65533, /* simplexmq maxMsgLen = 2^16 - 3 */
    SRPC_FRAME_VERSION = 1,
    SRPC_SPKI_LENGTH = 44,
    SRPC_SPKI_PREFIX_LENGTH = 12,
    SRPC_SIGNATURE_LENGTH = 64,
    SRPC_TAG_LENGTH = 32,
    SRPC_UNSIGNED_REQUEST_OVERHEAD = 4,
    SRPC_SIGNED_REQUEST_OVERHEAD = 114,
    SRPC_RESPONSE_OVERHEAD = 3
};

/* Frame kinds. SRPC_ANY is only an expectation for srpc_open. */
enum {
    SRPC_ANY = 0,
    SRPC_REQUEST = 1,
    SRPC_RESPONSE = 2
};

/* Status codes (negative). The comment names the fields of srpc_error set. */
enum {
    SRPC_OK = 0,
    SRPC_E_ARGUMENT = -1,           /* a NULL pointer or an output of the wrong size */
    /* pad errors: value = message length, bound = block length */
    SRPC_E_PAD_BLOCK_LENGTH = -2,   /* block length < 2 */
    SRPC_E_PAD_MESSAGE_MAX = -3,    /* message > 65533 bytes */
    SRPC_E_PAD_MESSAGE_FIT = -4,    /* message > block length - 2 */
    SRPC_E_UNPAD_BLOCK_SIZE = -5,   /* value = block size, bound = required length */
    SRPC_E_UNPAD_SHORT = -6,        /* value = block size (< 2) */
    SRPC_E_UNPAD_LENGTH_FIELD = -7, /* value = length field, bound = bytes that follow */
    SRPC_E_UNPAD_FILL = -8,         /* offset = first fill byte that is not '#' */
    SRPC_E_BATCH_BLOCK_LENGTH = -9, /* value = block length (< 2) */
    SRPC_E_BATCH_SHAPE = -10,       /* value = buffer size, bound = block length */
    SRPC_E_FRAME_NO_VERSION = -11, /* value = frame size (< 2) */
    SRPC_E_FRAME_VERSION = -12,    /* value = version, offset 0 */
    SRPC_E_FRAME_NO_TAG = -13,     /* offset 2 */
    SRPC_E_FRAME_TAG = -14,        /* value = tag byte, offset 2 */
    SRPC_E_FRAME_NO_SIGNER = -15,  /* offset 3 */
    SRPC_E_FRAME_SIGNER = -16,     /* value = signer byte, offset 3 */
    SRPC_E_FRAME_NO_KEY_LENGTH = -17, /* offset 4 */
    SRPC_E_FRAME_KEY_LENGTH = -18, /* value = key length byte, offset 4, bound 44 */
    SRPC_E_FRAME_KEY_PREFIX = -19, /* offset = first byte off the SPKI prefix */
    SRPC_E_FRAME_IN_KEY = -20,     /* value = frame size (5 to 48), ends in the key */
    SRPC_E_FRAME_NO_SIG_LENGTH = -21, /* offset 49 */
    SRPC_E_FRAME_SIG_LENGTH = -22, /* value = signature length byte, offset 49, bound 64 */
    SRPC_E_FRAME_IN_SIG = -23,     /* value = frame size (50 to 113), ends in the signature */
    SRPC_E_FRAME_NOT_REQUEST = -24, /* a response where a request was expected */
    SRPC_E_FRAME_NOT_RESPONSE = -25 /* a request where a response was expected */
};

typedef struct srpc_error {
    int status;    /* the status returned */
    size_t index;  /* batch forms: the message or block that failed */
    size_t offset; /* a byte offset, where the status has one */
    size_t value;  /* the offending value */
    size_t bound;  /* the limit it broke */
} srpc_error;

typedef struct srpc_frame {
    int kind;              /* SRPC_REQUEST or SRPC_RESPONSE */
    int is_signed;         /* 1 for a signed request */
    size_t key_offset;     /* the 44-byte SPKI DER key (signed request) */
    size_t sig_offset;     /* the 64-byte signature (signed request) */
    size_t payload_offset; /* the payload */
    size_t payload_length;
} srpc_frame;

/* Pad msg into out, which must be exactly `length` bytes. */
int srpc_pad(const unsigned char *msg, size_t msg_len, size_t length,
             unsigned char *out, size_t out_len, srpc_error *err);

/* Check a padded block; return the message length (at most 65535), which
 * starts at offset 2. `exact` requires size == length; `strict` requires
 * every fill byte to be '#'. */
int srpc_unpad(const unsigned char *block, size_t size, int exact, size_t length,
               int strict, srpc_error *err);

/* Pad `count` messages, stored back to back in src (lens[i] bytes each),
 * into out (exactly count * length bytes). The first bad message fails the
 * call; err->index names it. */
int srpc_pad_many(const unsigned char *src, size_t src_len, const size_t *lens,
                  size_t count, size_t length, unsigned char *out, size_t out_len,
                  srpc_error *err);

/* Unpad every `length`-byte block of buf; msg_lens has `count` entries
 * (count = buf_len / length). The first bad block fails the call;
 * err->index names it. */
int srpc_unpad_many(const unsigned char *buf, size_t buf_len, size_t length,
                    int strict, size_t *msg_lens, size_t count,
                    srpc_error *err);

/* Decode a frame (wire.md section 4) strictly. Fields are checked in the
 * order of their offsets: a frame both wrong and cut short is blamed on its
 * first wrong byte; one only cut short, on the offset where it ends. */
int srpc_frame_decode(const unsigned char *frame, size_t size, srpc_frame *out,
                      srpc_error *err);

/* The number of bytes before the payload: 3, 4 or 114 (0 for a bad kind). */
size_t srpc_frame_head_length(int kind, int is_signed);

/* Encode a frame into out, which must be exactly head + payload_len bytes.
 * A signed request takes key_der (44 bytes) and sig (64 bytes). */
int srpc_frame_encode(int kind, int is_signed, const unsigned char *key_der,
                      const unsigned char *sig, const unsigned char *payload,
                      size_t payload_len, unsigned char *out, size_t out_len,
                      srpc_error *err);

/* Frame and pad in one pass into block (exactly `length` bytes). */
int srpc_seal(int kind, int is_signed, const unsigned char *key_der,
              const unsigned char *sig, const unsigned char *payload, size_t payload_len,
              unsigned char *block, size_t length, srpc_error *err);

/* Unpad (exactly `length` bytes, optionally strict) and decode the frame
 * inside; `expect` is SRPC_ANY, SRPC_REQUEST or SRPC_RESPONSE. Offsets in
 * *out are relative to block. When the frame is a signed request and `tag`
 * (32 bytes) is not NULL, sm receives sig || tag || payload, the signed
 * message in libsodium's combined form: 96 + payload_length bytes, which
 * sm_len must allow. */
int srpc_open(const unsigned char *block, size_t size, size_t length, int strict,
              int expect, const unsigned char *tag, unsigned char *sm, size_t sm_len,
              srpc_frame *out, srpc_error *err);

/* Signing in place, so that the payload is copied once, into the block:
 *
 *   srpc_seal_signed_begin writes a signed request block but its head: the
 *   length field, the payload at SRPC_PAYLOAD_AT, the fill, and the 32-byte
 *   session tag right before the payload, at SRPC_SIGN_M_AT (84), so that
 *   tag || payload, the message of wire.md section 2, is contiguous;
 *   libsodium's combined crypto_sign(block + SRPC_SIGN_SM_AT, NULL,
 *   block + SRPC_SIGN_M_AT, 32 + payload_len, sk) then signs it in place (it
 *   moves the message onto itself, since sm + 64 == m, and writes the
 *   signature at offsets 20 to 83);
 *   srpc_seal_signed_end moves the signature to its place (52 to 115) and
 *   writes the head (version, "R1", key length, key_der, signature length).
 *
 * payload must not overlap block. */
enum {
    SRPC_SIGN_SM_AT = 20,
    SRPC_SIGN_M_AT = 84,
    SRPC_PAYLOAD_AT = 116
};

int srpc_seal_signed_begin(const unsigned char *tag, const unsigned char *payload,
                           size_t payload_len, unsigned char *block, size_t length,
                           srpc_error *err);

int srpc_seal_signed_end(const unsigned char *key_der, unsigned char *block,
                         size_t length);

/* Copy n bytes (the memcpy floor of the benchmarks). */
int srpc_copy(unsigned char *dst, size_t dst_len, const unsigned char *src, size_t n);

/* ---- strict JSON (wire.md section 3), in csrc/json_strict.c ------------
 *
 * srpc_json_check validates UTF-8 JSON text in one pass: valid UTF-8, no
 * byte-order mark, one value and nothing after it but whitespace, every
 * grammar rule, no NaN or Infinity, integers of at most 64 digits, no number
 * that overflows to infinity, nesting of at most 64 levels, no duplicate member
 * name in an object (compared after unescaping) and no lone surrogate. It
 * returns the byte offset where the value starts (after leading whitespace),
 * or a negative SRPC_E_JSON_* status.
 *
 * With `err`, a failure is explained as the pure backend (_wire/json_pure.py) reports
 * it: its first error, with the same offsets, found by the same phases in the
 * same order (UTF-8, byte-order mark, the depth pre-scan, then the grammar
 * in the order of the json module's scanner, trailing data, and lone
 * surrogates last). The explanation may read the input more than once.
 *
 * Member names of the open objects are kept in a workspace: a fixed one on
 * the C stack (256 names), or `ws` when the caller passes one of ws_size
 * bytes (it holds the most names whose srpc_json_workspace_size fits). When
 * they do not fit, SRPC_E_JSON_WORKSPACE asks for a larger one: without
 * `err` at once; with `err`, after reading to the end (or to an error) and
 * counting the names, with err->value the most names open at once, the
 * count a workspace of srpc_json_workspace_size(err->value) bytes holds for
 * the retry. `seed` keys the hash of member names.
 */
enum {
    SRPC_JSON_MAX_DEPTH = 64,
    SRPC_JSON_MAX_INT_DIGITS = 64
};

enum {
    SRPC_E_JSON_UTF8 = -40,        /* offset: the first byte of the bad sequence */
    SRPC_E_JSON_BOM = -41,
    SRPC_E_JSON_DEPTH = -42,
    SRPC_E_JSON_EXPECT_VALUE = -43, /* chars: where (for each of the grammar errors) */
    SRPC_E_JSON_EXPECT_NAME = -44,
    SRPC_E_JSON_EXPECT_COLON = -45,
    SRPC_E_JSON_EXPECT_COMMA = -46,
    SRPC_E_JSON_UNTERMINATED = -47, /* chars: the opening quote */
    SRPC_E_JSON_CONTROL = -48,
    SRPC_E_JSON_ESCAPE = -49,
    SRPC_E_JSON_UESCAPE = -50,
    SRPC_E_JSON_DUPLICATE = -51,   /* offset, length: the second name, quotes included */
    SRPC_E_JSON_NAN = -52,
    SRPC_E_JSON_INFINITY = -53,
    SRPC_E_JSON_NEG_INFINITY = -54,
    SRPC_E_JSON_INT_DIGITS = -55,  /* value: the number of digits */
    SRPC_E_JSON_RANGE = -56,       /* offset, length: the number */
    SRPC_E_JSON_EXTRA = -57,       /* chars: the first byte after the value */
    SRPC_E_JSON_SURROGATE = -58,   /* value: the lone surrogate (0xd800 to 0xdfff) */
    SRPC_E_JSON_WORKSPACE = -59    /* value (with err): the open member names needed */
};

typedef struct srpc_json_error {
    int status;
    size_t offset; /* a byte offset into the input */
    size_t chars;  /* the same offset counted in characters (code points) */
    size_t length; /* bytes of the span at offset */
    size_t value;
} srpc_json_error;

/* The size in bytes of a workspace for `count` open member names (SIZE_MAX
 * when that cannot be allocated). */
size_t srpc_json_workspace_size(size_t count);

long long srpc_json_check(const unsigned char *s, size_t n, uint64_t seed, void *ws,
                          size_t ws_size, srpc_json_error *err);

#endif /* SIMPLEX_RPC_H */
