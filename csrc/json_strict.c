/*
 * Strict JSON validation for simplex-rpc (wire.md section 3); the contract is
 * in simplex_rpc.h ("strict JSON").
 *
 * The grammar pass follows CPython's json scanner (Modules/_json.c) step by
 * step, so that the first error it finds, and the offset it names, are the
 * ones the pure backend (src/simplex_rpc/_wire/json_pure.py) reports: the json module
 * raises the grammar errors there, and the pure backend's hooks add the
 * errors of the strict rules at the same points (a number when it is read, a
 * duplicate name when its object closes, a lone surrogate after the whole
 * value). The pass works on UTF-8 bytes where the scanner works on code
 * points; every decision compares a position with an ASCII character, which a
 * byte of a multi-byte sequence never equals, so both take the same path, and
 * offsets are converted to characters at the end.
 *
 * No allocation: the container stack is bounded by the depth limit, and the
 * member names of the open objects live in a caller's workspace or a fixed
 * one on the stack. When they outgrow the workspace, an explaining call goes
 * on counting them (without the duplicate check) to report the peak number,
 * so that the caller's workspace is sized by the names, not by the input.
 */
#include "simplex_rpc.h"

#include <stdint.h>
#include <string.h>

#define MAX_DEPTH SRPC_JSON_MAX_DEPTH
#define MAX_INT_DIGITS SRPC_JSON_MAX_INT_DIGITS
#define STACK_NAMES 256   /* member names of open objects kept without a workspace */
#define STACK_BUCKETS 512 /* a power of two */

/* One member name of an open object: its content (between the quotes), its
 * hash, and the previous name in the same hash bucket (index + 1, 0 for none). */
typedef struct name {
    size_t start;
    size_t end;
    uint64_t hash;
    size_t next;
} name;

typedef struct names {
    name *items;
    size_t *buckets;
    size_t capacity;
    size_t mask;
    size_t top;
    int may_count; /* past capacity, count the names instead of failing */
    int counting;  /* the workspace is full: names are counted, not kept */
    size_t peak;   /* the most names open at once, while counting */
} names;

typedef struct scan {
    const unsigned char *s;
    size_t n;
    uint64_t seed;
    names names;
    int surrogate; /* the first lone surrogate in document order, or 0 */
    /* the first error */
    size_t offset;
    size_t length;
    size_t value;
} scan;

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_ws(const unsigned char *s, size_t n, size_t p)
{
    while (p < n && is_ws(s[p])) {
        p++;
    }
    return p;
}

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static int error_at(scan *t, int status, size_t offset, size_t length, size_t value)
{
    t->offset = offset;
    t->length = length;
    t->value = value;
    return status;
}

/* The length of the valid UTF-8 sequence at s[i] (i < n), or 0 when it is
 * ill-formed (Python's decoder: no overlong forms, no surrogates, at most
 * U+10FFFF). */
static size_t utf8_length(const unsigned char *s, size_t n, size_t i)
{
    unsigned char c = s[i];
    unsigned char lo = 0x80;
    unsigned char hi = 0xbf;
    size_t len;
    if (c < 0x80) {
        return 1;
    }
    if (c < 0xc2) {
        return 0;
    }
    if (c < 0xe0) {
        len = 2;
    } else if (c < 0xf0) {
        len = 3;
        if (c == 0xe0) {
            lo = 0xa0;
        } else if (c == 0xed) {
            hi = 0x9f;
        }
    } else if (c < 0xf5) {
        len = 4;
        if (c == 0xf0) {
            lo = 0x90;
        } else if (c == 0xf4) {
            hi = 0x8f;
        }
    } else {
        return 0;
    }
    if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) {
        return 0;
    }
    for (size_t k = 2; k < len; k++) {
        if (s[i + k] < 0x80 || s[i + k] > 0xbf) {
            return 0;
        }
    }
    return len;
}

/* Eight bytes at s, in any byte order: the tests below look at every byte. */
static uint64_t load8(const unsigned char *s)
{
    uint64_t x;
    memcpy(&x, s, sizeof x);
    return x;
}

#define ONES ((uint64_t)0x0101010101010101u)
#define HIGHS ((uint64_t)0x8080808080808080u)

/* Whether one of the eight bytes of x is '"', '\\', a control character or
 * not ASCII: the bytes a string scan must stop at. */
static int special8(uint64_t x)
{
    uint64_t quote = x ^ (ONES * '"');
    uint64_t slash = x ^ (ONES * '\\');
    uint64_t t = ((x - ONES * 0x20) | (quote - ONES) | (slash - ONES) | x) & HIGHS;
    /* a borrow from one byte can only mark a byte above one that is special */
    return t != 0;
}

/* The first byte offset at which s is not valid UTF-8, or n. */
static size_t utf8_first_invalid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (n - i >= 8 && (load8(s + i) & HIGHS) == 0) {
            i += 8;
            continue;
        }
        size_t len = utf8_length(s, n, i);
        if (len == 0) {
            return i;
        }
        i += len;
    }
    return n;
}

/* Characters (code points) in the valid UTF-8 s[0:offset]. */
static size_t count_chars(const unsigned char *s, size_t offset)
{
    size_t chars = 0;
    for (size_t i = 0; i < offset; i++) {
        chars += (s[i] & 0xc0) != 0x80;
    }
    return chars;
}

/* The pure backend's depth pre-scan: brackets outside strings, where a
 * string runs from a quote to the next unescaped quote (or to the end). */
static int too_deep(const unsigned char *s, size_t n)
{
    long depth = 0;
    int in_str = 0;
    int escape = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (in_str) {
            if (escape) {
                escape = 0;
            } else if (c == '\\') {
                escape = 1;
            } else if (c == '"') {
                in_str = 0;
            }
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > MAX_DEPTH) {
                return 1;
            }
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return 0;
}

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* Four hex digits at s as a code unit, or -1. */
static long hex4(const unsigned char *s)
{
    long v = 0;
    for (int k = 0; k < 4; k++) {
        int d = hex_value(s[k]);
        if (d < 0) {
            return -1;
        }
        v = (v << 4) | d;
    }
    return v;
}

/* ---- names: unescaped content, hashing and comparison ------------------ */

/* The bytes of a string's content once unescaped, as UTF-8 (a lone surrogate
 * as its three-byte form, which valid input never holds raw). The content
 * has passed the string scan, so every escape in it is well formed. */
typedef struct decoder {
    const unsigned char *s;
    size_t p;
    size_t end;
    unsigned char buf[4];
    int len;
    int pos;
} decoder;

static int decode_next(decoder *d)
{
    if (d->pos < d->len) {
        return d->buf[d->pos++];
    }
    if (d->p >= d->end) {
        return -1;
    }
    const unsigned char *s = d->s;
    unsigned char c = s[d->p];
    if (c != '\\') {
        d->p++;
        return c;
    }
    c = s[d->p + 1];
    if (c != 'u') {
        d->p += 2;
        switch (c) {
        case 'b': return '\b';
        case 'f': return '\f';
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        default: return c; /* '"', '\\' or '/' */
        }
    }
    unsigned long cp = (unsigned long)hex4(s + d->p + 2);
    d->p += 6;
    if (cp >= 0xd800 && cp <= 0xdbff && d->end - d->p >= 6 && s[d->p] == '\\' &&
        s[d->p + 1] == 'u') {
        unsigned long low = (unsigned long)hex4(s + d->p + 2);
        if (low >= 0xdc00 && low <= 0xdfff) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            d->p += 6;
        }
    }
    if (cp < 0x80) {
        return (int)cp;
    }
    if (cp < 0x800) {
        d->buf[0] = (unsigned char)(0xc0 | (cp >> 6));
        d->buf[1] = (unsigned char)(0x80 | (cp & 0x3f));
        d->len = 2;
    } else if (cp < 0x10000) {
        d->buf[0] = (unsigned char)(0xe0 | (cp >> 12));
        d->buf[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        d->buf[2] = (unsigned char)(0x80 | (cp & 0x3f));
        d->len = 3;
    } else {
        d->buf[0] = (unsigned char)(0xf0 | (cp >> 18));
        d->buf[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
        d->buf[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        d->buf[3] = (unsigned char)(0x80 | (cp & 0x3f));
        d->len = 4;
    }
    d->pos = 1;
    return d->buf[0];
}

static void decoder_init(decoder *d, const unsigned char *s, size_t start, size_t end)
{
    d->s = s;
    d->p = start;
    d->end = end;
    d->len = 0;
    d->pos = 0;
}

#define HASH_PRIME ((uint64_t)0x100000001b3u)

static uint64_t hash_finish(uint64_t h)
{
    h ^= h >> 33;
    h *= (uint64_t)0xff51afd7ed558ccdu;
    h ^= h >> 33;
    return h;
}

/* The keyed hash of a name's unescaped content. */
static uint64_t name_hash(const scan *t, size_t start, size_t end, int escaped)
{
    uint64_t h = t->seed ^ (uint64_t)0xcbf29ce484222325u;
    if (!escaped) {
        for (size_t i = start; i < end; i++) {
            h = (h ^ t->s[i]) * HASH_PRIME;
        }
    } else {
        decoder d;
        int b;
        decoder_init(&d, t->s, start, end);
        while ((b = decode_next(&d)) >= 0) {
            h = (h ^ (uint64_t)b) * HASH_PRIME;
        }
    }
    return hash_finish(h);
}

static int same_name(const scan *t, const name *a, size_t start, size_t end)
{
    decoder x;
    decoder y;
    decoder_init(&x, t->s, a->start, a->end);
    decoder_init(&y, t->s, start, end);
    for (;;) {
        int bx = decode_next(&x);
        int by = decode_next(&y);
        if (bx != by) {
            return 0;
        }
        if (bx < 0) {
            return 1;
        }
    }
}

/* Count one more open name, past the workspace: 1, as for a new name. */
static int count_name(names *ns)
{
    ns->counting = 1;
    ns->top++;
    if (ns->top > ns->peak) {
        ns->peak = ns->top;
    }
    return 1;
}

/* Add a name to the object whose names start at index `first`: 1 if it is
 * new, 0 if the object has it already, -1 if the workspace is full. Once
 * full, a scan that may count only counts (1): the names it would keep from
 * then on are an upper bound of those a large enough workspace keeps, since
 * that scan stops at the same error or earlier (at a duplicate). */
static int add_name(scan *t, size_t first, size_t start, size_t end, int escaped)
{
    names *ns = &t->names;
    if (ns->counting) {
        return count_name(ns);
    }
    uint64_t h = name_hash(t, start, end, escaped);
    size_t b = (size_t)h & ns->mask;
    for (size_t i = ns->buckets[b]; i > first; i = ns->items[i - 1].next) {
        const name *other = &ns->items[i - 1];
        if (other->hash == h && same_name(t, other, start, end)) {
            return 0;
        }
    }
    if (ns->top == ns->capacity) {
        return ns->may_count ? count_name(ns) : -1;
    }
    name *item = &ns->items[ns->top];
    item->start = start;
    item->end = end;
    item->hash = h;
    item->next = ns->buckets[b];
    ns->top++;
    ns->buckets[b] = ns->top;
    return 1;
}

/* Forget the names of a closed object: those from index `first` on. */
static void drop_names(names *ns, size_t first)
{
    if (ns->counting) { /* the buckets are no longer looked at */
        ns->top = first;
        return;
    }
    while (ns->top > first) {
        ns->top--;
        const name *item = &ns->items[ns->top];
        ns->buckets[(size_t)item->hash & ns->mask] = item->next;
    }
}

/* ---- the grammar pass ----------------------------------------------------- */

/* A string whose opening quote is at p - 1 (scanstring_unicode). On success
 * *out is the offset after the closing quote and *escaped says whether the
 * content holds an escape. */
static int scan_string(scan *t, size_t p, size_t *out, int *escaped)
{
    const unsigned char *s = t->s;
    size_t n = t->n;
    size_t begin = p - 1;
    for (;;) {
        /* to the next quote or backslash: eight plain bytes at a time, and the
         * bytes of a chunk that holds anything else one by one */
        while (p < n) {
            size_t stop = n;
            if (n - p >= 8) {
                if (!special8(load8(s + p))) {
                    p += 8;
                    continue;
                }
                stop = p + 8;
            }
            while (p < stop) {
                unsigned char c = s[p];
                if (c < 0x80) {
                    if (c == '"' || c == '\\') {
                        goto stopped;
                    }
                    if (c < 0x20) {
                        return error_at(t, SRPC_E_JSON_CONTROL, p, 0, 0);
                    }
                    p++;
                    continue;
                }
                /* the common sequences first: two bytes, and three outside E0 and ED */
                if (c >= 0xc2 && c < 0xe0 && n - p >= 2 && (s[p + 1] & 0xc0) == 0x80) {
                    p += 2;
                    continue;
                }
                if (c > 0xe0 && c < 0xf0 && c != 0xed && n - p >= 3 &&
                    (s[p + 1] & 0xc0) == 0x80 && (s[p + 2] & 0xc0) == 0x80) {
                    p += 3;
                    continue;
                }
                size_t len = utf8_length(s, n, p);
                if (len == 0) {
                    return error_at(t, SRPC_E_JSON_UTF8, p, 0, 0);
                }
                p += len;
            }
        }
    stopped:
        if (p >= n) {
            return error_at(t, SRPC_E_JSON_UNTERMINATED, begin, 0, 0);
        }
        if (s[p] == '"') {
            *out = p + 1;
            return 0;
        }
        *escaped = 1;
        p++; /* after the backslash */
        if (p == n) {
            return error_at(t, SRPC_E_JSON_UNTERMINATED, begin, 0, 0);
        }
        unsigned char c = s[p];
        if (c != 'u') {
            if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                c == 'r' || c == 't') {
                p++;
                continue;
            }
            return error_at(t, SRPC_E_JSON_ESCAPE, p - 1, 0, 0);
        }
        size_t u = p;
        p++;
        /* the scanner wants a character after the four digits */
        if (n - p <= 4) {
            return error_at(t, SRPC_E_JSON_UESCAPE, u, 0, 0);
        }
        long cp = hex4(s + p);
        if (cp < 0) {
            return error_at(t, SRPC_E_JSON_UESCAPE, u, 0, 0);
        }
        p += 4;
        if (cp >= 0xd800 && cp <= 0xdbff && n - p > 6 && s[p] == '\\' && s[p + 1] == 'u') {
            long low = hex4(s + p + 2);
            if (low < 0) {
                return error_at(t, SRPC_E_JSON_UESCAPE, p + 1, 0, 0);
            }
            if (low >= 0xdc00 && low <= 0xdfff) {
                p += 6;
                continue;
            }
        }
        if (cp >= 0xd800 && cp <= 0xdfff && t->surrogate == 0) {
            t->surrogate = (int)cp;
        }
    }
}

/* The decimal digits of 2^1024 - 2^970: the smallest value that a correctly
 * rounded conversion turns into infinity (halfway above DBL_MAX, which rounds
 * to the even 2^1024). */
static const char overflow_digits[] =
    "17976931348623158079372897140530341507993413271003782693617377898044"
    "49682927647509466490179775872070963302864166928879109465555478519404"
    "02630657488671505820681908902000708383676273854845817711531764475730"
    "27006985557136695962284291481986083493647529271907416844436551070434"
    "2711559699508093042880177904174497792";
_Static_assert(sizeof overflow_digits == 310, "the 309 digits of 2^1024 - 2^970");
#define OVERFLOW_EXPONENT 308 /* overflow_digits[0] is in the 10^308 place */
#define EXPONENT_CAP ((int64_t)1 << 40)

/* Whether float() of the number s[start:end] (a valid JSON number with a
 * fraction or an exponent) is infinite: compares its decimal digits with the
 * overflow threshold, exactly, without converting. */
static int overflows(const unsigned char *s, size_t start, size_t end)
{
    size_t p = start;
    if (s[p] == '-') {
        p++;
    }
    size_t int_start = p;
    while (p < end && is_digit(s[p])) {
        p++;
    }
    size_t int_end = p;
    size_t frac_start = p;
    size_t frac_end = p;
    if (p < end && s[p] == '.') {
        frac_start = ++p;
        while (p < end && is_digit(s[p])) {
            p++;
        }
        frac_end = p;
    }
    int64_t exponent = 0;
    if (p < end && (s[p] == 'e' || s[p] == 'E')) {
        p++;
        int negative = 0;
        if (s[p] == '-' || s[p] == '+') {
            negative = s[p] == '-';
            p++;
        }
        while (p < end) {
            if (exponent < EXPONENT_CAP) {
                exponent = exponent * 10 + (s[p] - '0');
            }
            p++;
        }
        if (negative) {
            exponent = -exponent;
        }
    }
    /* the first non-zero digit and its place */
    int64_t place;
    size_t first = int_start;
    while (first < int_end && s[first] == '0') {
        first++;
    }
    if (first < int_end) {
        place = (int64_t)(int_end - first) - 1;
    } else {
        first = frac_start;
        while (first < frac_end && s[first] == '0') {
            first++;
        }
        if (first == frac_end) {
            return 0; /* zero */
        }
        place = -(int64_t)(first - frac_start) - 1;
    }
    place += exponent;
    if (place != OVERFLOW_EXPONENT) {
        return place > OVERFLOW_EXPONENT;
    }
    /* the same place: compare digit by digit, the number's missing digits as 0 */
    size_t q = first;
    for (size_t k = 0; k < sizeof overflow_digits - 1; k++) {
        int digit = 0;
        if (q == int_end) {
            q = frac_start;
        }
        if (q < frac_end || (q < int_end)) {
            digit = s[q] - '0';
            q++;
        }
        int limit = overflow_digits[k] - '0';
        if (digit != limit) {
            return digit > limit;
        }
    }
    return 1; /* equal to the threshold, or above it */
}

/* A number at `start` (_match_number_unicode), then the pure backend's
 * checks of it (parse_int and parse_float). */
static int scan_number(scan *t, size_t start, size_t *out)
{
    const unsigned char *s = t->s;
    size_t n = t->n;
    size_t p = start;
    int is_float = 0;
    if (s[p] == '-') {
        p++;
        if (p >= n) {
            return error_at(t, SRPC_E_JSON_EXPECT_VALUE, start, 0, 0);
        }
    }
    if (s[p] >= '1' && s[p] <= '9') {
        p++;
        while (p < n && is_digit(s[p])) {
            p++;
        }
    } else if (s[p] == '0') {
        p++;
    } else {
        return error_at(t, SRPC_E_JSON_EXPECT_VALUE, start, 0, 0);
    }
    if (p + 1 < n && s[p] == '.' && is_digit(s[p + 1])) {
        is_float = 1;
        p += 2;
        while (p < n && is_digit(s[p])) {
            p++;
        }
    }
    if (p + 1 < n && (s[p] == 'e' || s[p] == 'E')) {
        size_t e_start = p;
        p++;
        if (p + 1 < n && (s[p] == '-' || s[p] == '+')) {
            p++;
        }
        while (p < n && is_digit(s[p])) {
            p++;
        }
        if (is_digit(s[p - 1])) {
            is_float = 1;
        } else {
            p = e_start;
        }
    }
    if (is_float) {
        if (overflows(s, start, p)) {
            return error_at(t, SRPC_E_JSON_RANGE, start, p - start, 0);
        }
    } else {
        size_t digits = p - start - (s[start] == '-');
        if (digits > MAX_INT_DIGITS) {
            return error_at(t, SRPC_E_JSON_INT_DIGITS, start, p - start, digits);
        }
    }
    *out = p;
    return 0;
}

static int matches(const unsigned char *s, size_t n, size_t p, const char *word, size_t len)
{
    return n - p > len && memcmp(s + p + 1, word, len) == 0;
}

typedef struct level {
    int is_object;
    int has_duplicate;
    size_t first_name; /* the object's names start at this index */
    size_t dup_start;  /* its first duplicate name (quotes included) */
    size_t dup_end;
} level;

/* The whole grammar, iteratively (scan_once_unicode and the container
 * parsers), then trailing data, then lone surrogates. 0 or a status. */
static int grammar(scan *t, size_t *value_start)
{
    const unsigned char *s = t->s;
    size_t n = t->n;
    level stack[MAX_DEPTH];
    int depth = 0;
    int escaped;
    size_t p = skip_ws(s, n, 0);
    size_t q;
    int status;
    *value_start = p;

value:
    if (p >= n) {
        return error_at(t, SRPC_E_JSON_EXPECT_VALUE, p, 0, 0);
    }
    switch (s[p]) {
    case '"':
        escaped = 0;
        status = scan_string(t, p + 1, &p, &escaped);
        if (status != 0) {
            return status;
        }
        goto after_value;
    case '{':
    case '[':
        if (depth == MAX_DEPTH) {
            return error_at(t, SRPC_E_JSON_DEPTH, p, 0, 0);
        }
        stack[depth].is_object = s[p] == '{';
        stack[depth].has_duplicate = 0;
        stack[depth].first_name = t->names.top;
        depth++;
        p = skip_ws(s, n, p + 1);
        if (stack[depth - 1].is_object) {
            if (p < n && s[p] == '}') {
                p++;
                depth--;
                goto after_value;
            }
            goto key;
        }
        if (p < n && s[p] == ']') {
            p++;
            depth--;
            goto after_value;
        }
        goto value;
    case 'n':
        if (matches(s, n, p, "ull", 3)) {
            p += 4;
            goto after_value;
        }
        break;
    case 't':
        if (matches(s, n, p, "rue", 3)) {
            p += 4;
            goto after_value;
        }
        break;
    case 'f':
        if (matches(s, n, p, "alse", 4)) {
            p += 5;
            goto after_value;
        }
        break;
    case 'N':
        if (matches(s, n, p, "aN", 2)) {
            return error_at(t, SRPC_E_JSON_NAN, p, 3, 0);
        }
        break;
    case 'I':
        if (matches(s, n, p, "nfinity", 7)) {
            return error_at(t, SRPC_E_JSON_INFINITY, p, 8, 0);
        }
        break;
    case '-':
        if (matches(s, n, p, "Infinity", 8)) {
            return error_at(t, SRPC_E_JSON_NEG_INFINITY, p, 9, 0);
        }
        break;
    default:
        break;
    }
    status = scan_number(t, p, &p);
    if (status != 0) {
        return status;
    }

after_value:
    if (depth == 0) {
        p = skip_ws(s, n, p);
        if (p != n) {
            return error_at(t, SRPC_E_JSON_EXTRA, p, 0, 0);
        }
        if (t->surrogate != 0) {
            return error_at(t, SRPC_E_JSON_SURROGATE, 0, 0, (size_t)t->surrogate);
        }
        return 0;
    }
    p = skip_ws(s, n, p);
    if (stack[depth - 1].is_object) {
        if (p < n && s[p] == '}') {
            level *top = &stack[depth - 1];
            if (top->has_duplicate) {
                /* the pure backend's object_pairs_hook runs when the object closes */
                return error_at(t, SRPC_E_JSON_DUPLICATE, top->dup_start,
                                top->dup_end - top->dup_start, 0);
            }
            drop_names(&t->names, top->first_name);
            depth--;
            p++;
            goto after_value;
        }
        if (p >= n || s[p] != ',') {
            return error_at(t, SRPC_E_JSON_EXPECT_COMMA, p, 0, 0);
        }
        p = skip_ws(s, n, p + 1);
        goto key;
    }
    if (p < n && s[p] == ']') {
        depth--;
        p++;
        goto after_value;
    }
    if (p >= n || s[p] != ',') {
        return error_at(t, SRPC_E_JSON_EXPECT_COMMA, p, 0, 0);
    }
    p = skip_ws(s, n, p + 1);
    goto value;

key:
    if (p >= n || s[p] != '"') {
        return error_at(t, SRPC_E_JSON_EXPECT_NAME, p, 0, 0);
    }
    escaped = 0;
    status = scan_string(t, p + 1, &q, &escaped);
    if (status != 0) {
        return status;
    }
    {
        level *top = &stack[depth - 1];
        if (!top->has_duplicate) {
            int added = add_name(t, top->first_name, p + 1, q - 1, escaped);
            if (added < 0) {
                return SRPC_E_JSON_WORKSPACE;
            }
            if (added == 0) {
                top->has_duplicate = 1;
                top->dup_start = p;
                top->dup_end = q;
            }
        }
    }
    p = skip_ws(s, n, q);
    if (p >= n || s[p] != ':') {
        return error_at(t, SRPC_E_JSON_EXPECT_COLON, p, 0, 0);
    }
    p = skip_ws(s, n, p + 1);
    goto value;
}

/* ---- the entry points -------------------------------------------------------- */

/* The hash buckets for `count` names: a power of two, at least 64, one per name
 * or more. */
static size_t workspace_buckets(size_t count)
{
    size_t b = 64;
    while (b < count) {
        b <<= 1;
    }
    return b;
}

#define MAX_WORKSPACE_NAMES (SIZE_MAX / 4 / sizeof(name))

size_t srpc_json_workspace_size(size_t count)
{
    /* no input that fits in memory comes near; the sum must not wrap all the same */
    if (count > MAX_WORKSPACE_NAMES) {
        return SIZE_MAX;
    }
    return count * sizeof(name) + workspace_buckets(count) * sizeof(size_t);
}

/* The most names a workspace of `size` bytes holds: the largest count whose
 * srpc_json_workspace_size is at most `size`. For each power of two b, the
 * counts that need at most b buckets and fit beside them are at most
 * min(b, (size - 8b) / 32); the largest of these is the answer. */
static size_t workspace_capacity(size_t size)
{
    size_t best = 0;
    for (size_t b = 64; b <= size / sizeof(size_t) && b <= MAX_WORKSPACE_NAMES; b <<= 1) {
        size_t count = (size - b * sizeof(size_t)) / sizeof(name);
        if (count > b) {
            count = b;
        }
        if (count > best) {
            best = count;
        }
    }
    return best;
}

static long long explain(scan *t, int status, srpc_json_error *err)
{
    const unsigned char *s = t->s;
    size_t n = t->n;
    size_t offset = 0;
    size_t length = 0;
    size_t value = 0;
    size_t bad = utf8_first_invalid(s, n);
    if (bad < n) {
        status = SRPC_E_JSON_UTF8;
        offset = bad;
    } else if (n >= 3 && s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf) {
        status = SRPC_E_JSON_BOM;
    } else if (too_deep(s, n)) {
        status = SRPC_E_JSON_DEPTH;
    } else {
        offset = t->offset;
        length = t->length;
        value = t->value;
    }
    err->status = status;
    err->offset = offset;
    err->chars = status == SRPC_E_JSON_UTF8 ? offset : count_chars(s, offset);
    err->length = length;
    err->value = value;
    return status;
}

long long srpc_json_check(const unsigned char *s, size_t n, uint64_t seed, void *ws,
                          size_t ws_size, srpc_json_error *err)
{
    name stack_names[STACK_NAMES];
    size_t stack_buckets[STACK_BUCKETS];
    scan t;
    size_t start = 0;
    if (s == NULL && n != 0) {
        return SRPC_E_ARGUMENT;
    }
    if (s == NULL) {
        s = (const unsigned char *)"";
    }
    t.s = s;
    t.n = n;
    t.seed = seed;
    t.surrogate = 0;
    t.offset = 0;
    t.length = 0;
    t.value = 0;
    size_t count = ws != NULL && ws_size != SIZE_MAX ? workspace_capacity(ws_size) : 0;
    if (count > STACK_NAMES) {
        size_t buckets = workspace_buckets(count);
        t.names.items = (name *)ws;
        t.names.buckets = (size_t *)(void *)((unsigned char *)ws + count * sizeof(name));
        t.names.capacity = count;
        t.names.mask = buckets - 1;
        memset(t.names.buckets, 0, buckets * sizeof(size_t));
    } else {
        t.names.items = stack_names;
        t.names.buckets = stack_buckets;
        t.names.capacity = STACK_NAMES;
        t.names.mask = STACK_BUCKETS - 1;
        memset(stack_buckets, 0, sizeof stack_buckets);
    }
    t.names.top = 0;
    t.names.may_count = err != NULL;
    t.names.counting = 0;
    t.names.peak = 0;
    int status = grammar(&t, &start);
    if (t.names.counting) {
        /* whatever the scan found past the workspace: the caller retries with
         * a workspace for the peak, which finds the first error */
        memset(err, 0, sizeof *err);
        err->status = SRPC_E_JSON_WORKSPACE;
        err->value = t.names.peak;
        return SRPC_E_JSON_WORKSPACE;
    }
    if (status == 0) {
        return (long long)start;
    }
    if (err == NULL) {
        return status;
    }
    return explain(&t, status, err);
}
