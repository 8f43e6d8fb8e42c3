/*
 * simplex-rpc C core: SimpleX padding and the padded block of the agent's
 * Service RPC message (wire.md sections 4 and 5), with batch forms over one
 * contiguous buffer. The message's fields are encoded by one definition, the
 * pure-Python codec (_wire/agent_block.py); C builds the block around them.
 *
 * Contract of every function here:
 *   - C11, no Python objects, no allocation, no global mutable state.
 *   - Every length is checked before use; size arithmetic never overflows.
 *   - The return value is a non-negative result (SRPC_OK, or a length where
 *     the function says so) or a negative status, one SRPC_E_* code. When
 *     `err` is not NULL, a failure also fills it with the details the Python
 *     wrapper needs to build the same message as the pure backend; the
 *     wrapper passes NULL on its fast path and asks again only on failure.
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
    SRPC_NO_PQ_PADDED_LENGTH = 14832, /* e2eEncConnInfoLength PQSupportOff */
    SRPC_MAX_MESSAGE_LENGTH = 65533, /* simplexmq maxMsgLen = 2^16 - 3 */
    SRPC_SPKI_LENGTH = 44,
    SRPC_SIGNATURE_LENGTH = 64,
    SRPC_TAG_LENGTH = 32
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
    SRPC_E_BATCH_SHAPE = -10        /* value = buffer size, bound = block length */
};

typedef struct srpc_error {
    int status;    /* the status returned */
    size_t index;  /* batch forms: the message or block that failed */
    size_t offset; /* a byte offset, where the status has one */
    size_t value;  /* the offending value */
    size_t bound;  /* the limit it broke */
} srpc_error;


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

/* Pad head || payload into block (exactly `length` bytes) in one pass: the
 * message of an unsigned request ('A' ... '0'), a response ('P') or a
 * rejection ('J'). Fails as srpc_pad would for the joined message. */
int srpc_seal_parts(const unsigned char *head, size_t head_len,
                    const unsigned char *payload, size_t payload_len,
                    unsigned char *block, size_t length, srpc_error *err);

/* srpc_seal_parts for `count` payloads stored back to back in src (lens[i]
 * bytes each), all with the same head, into out (exactly count * length
 * bytes): the unsigned requests of one reply queue. Every payload is checked
 * before anything is written; the first that fails fails the call, and
 * err->index names it. */
int srpc_seal_parts_many(const unsigned char *head, size_t head_len,
                         const unsigned char *src, size_t src_len, const size_t *lens,
                         size_t count, size_t length, unsigned char *out, size_t out_len,
                         srpc_error *err);

/* Signing a request in place, so that the payload is copied once, into the
 * block. The payload starts at `payload_at` (2 + the head's length), and the
 * head ends with the signature: ... '1' 44 key 64 sig.
 *   srpc_seal_signed_begin writes the length field, the payload at payload_at,
 *   the fill, and the 32-byte session tag right before the payload, so that
 *   tag || payload, the signed message of wire.md section 2, is contiguous;
 *   libsodium's combined crypto_sign(block + payload_at - 96, NULL,
 *   block + payload_at - 32, 32 + payload_len, sk) then signs it in place (it
 *   moves the message onto itself, since sm + 64 == m, and writes the
 *   signature 96 bytes before the payload);
 *   srpc_seal_signed_end moves the signature to its place (the 64 bytes before
 *   the payload) and writes `head` (everything from 'A' to the signature's
 *   length byte, payload_at - 66 bytes) at offset 2.
 * payload must not overlap block. */
enum {
    SRPC_SIGN_MIN_PAYLOAD_AT = 98 /* 2 + 96: room for sig || tag before the payload */
};

int srpc_seal_signed_begin(const unsigned char *tag, const unsigned char *payload,
                           size_t payload_len, size_t payload_at, unsigned char *block,
                           size_t length, srpc_error *err);

int srpc_seal_signed_end(const unsigned char *head, size_t head_len, unsigned char *block,
                         size_t length, size_t payload_at);

/* Lay out sig (64) || tag (32) || payload into sm (exactly 96 + payload_len
 * bytes), the signed message in libsodium's combined form for crypto_sign_open. */
int srpc_signed_message(const unsigned char *sig, const unsigned char *tag,
                        const unsigned char *payload, size_t payload_len,
                        unsigned char *sm, size_t sm_len);

/* ---- the request's head, read in C (V8 Agent/Protocol.hs) ---------------
 *
 * V8 = simplexmq commit 22815214468d4eb79a5e98df7a1ba2daa5d07ad7,
 * src/Simplex/Messaging/Agent/Protocol.hs: `instance Encoding AgentMessage`
 * ('A' || NonEmpty SMPQueueInfo || Maybe RequestSignature || Tail payload) and
 * `instance Encoding SMPQueueInfo`; the primitives (ByteString, NonEmpty, Maybe)
 * are Encoding.hs on master.
 *
 * C reads the usual head only: every reply queue of client version 2 or more
 * (not the legacy server encoding of version 1), whose hosts are plain domain
 * names (_wire/agent_block.py _PLAIN_DOMAIN: the one host text whose canonical
 * form is itself without the TransportHost parser), with at most
 * SRPC_HEAD_QUEUES queues. It accepts only what the strict codec
 * (_wire/agent_block.py parse_request_head) accepts, to the same values. On
 * anything else, valid or not, it returns SRPC_HEAD_DEFER and the codec reads
 * the head: it is the codec that words every error, so both backends raise the
 * same one.
 *
 * Results (`res`, SRPC_HEAD_RESULT_LENGTH entries, offsets into `block`):
 *   res[0] message length (also set for SRPC_HEAD_DEFER)
 *   res[1] payload offset
 *   res[2] signed: offset of the signer's raw 32-byte key (after its SPKI
 *          prefix); unsigned: 0
 *   res[3] number of reply queues
 *   res[4 + 6 i ...] queue i: its first byte (the client version), its sender
 *          id's length byte (the server is between the two, after the version),
 *          its DH key's length byte, its end, its client version, its queue
 *          mode ('M', 'C', or 0 for none).
 */
enum {
    SRPC_HEAD_DEFER = -11,  /* padding fine, head left to the codec: no error by itself */
    SRPC_HEAD_QUEUES = 4,   /* at most this many reply queues are read in C */
    SRPC_HEAD_QUEUE_FIELDS = 6,
    SRPC_HEAD_RESULT_LENGTH = 28 /* 4 + SRPC_HEAD_QUEUE_FIELDS * SRPC_HEAD_QUEUES */
};

/* Read the head of a request message (unpadded, msg_len bytes, 'A' first);
 * offsets in res count from `msg` plus `base` (2 for a message inside a
 * block). Returns SRPC_OK, SRPC_HEAD_DEFER or SRPC_E_ARGUMENT. */
int srpc_request_head(const unsigned char *msg, size_t msg_len, size_t base, size_t *res,
                      size_t res_len);

/* Open a request block in one call: unpad it (exactly SRPC_PADDED_LENGTH bytes,
 * `strict` fill; an unpad failure returns srpc_unpad's status and fills `err`
 * as it does), read its head (srpc_request_head, base 2), and, when it is
 * signed and sm is not NULL, lay out sig || tag || payload into sm as
 * srpc_signed_message does (sm_len must be at least 96 + the payload's
 * length). */
int srpc_open_request(const unsigned char *block, size_t size, int strict,
                      const unsigned char *tag, unsigned char *sm, size_t sm_len,
                      size_t *res, size_t res_len, srpc_error *err);

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
