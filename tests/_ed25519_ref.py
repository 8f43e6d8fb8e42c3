"""Ed25519 reference arithmetic for the tests, written from RFC 8032 section 5.1.

Pure Python, slow and not constant time. It lets tests build keys and
signatures that one acceptance rule takes and another refuses, and compare the
library's verdicts with rules written out in a few lines each. No library code
imports it.

One point representation throughout: extended homogeneous coordinates
``(X, Y, Z, T)`` with ``x = X/Z``, ``y = Y/Z`` and ``x*y = T/Z`` (section 5.1.4).

Three acceptance rules, each taking ``(public, signature, message)``:

- ``strict_verify``: libsodium's policy, which the library follows: S < L,
  canonical A and R that are not of small order, and the cofactorless
  equation with R compared as bytes.
- ``donna_verify``: ed25519-donna's (used by the SimpleX core's agent through
  crypton): only the top three bits of S are checked, A is decoded leniently,
  R is compared as bytes.
- ``cofactorless_equation_holds``: no range, canonicity or small-order
  checks, only whether ``[S]B == R + [k]A`` holds as points, with A and R
  decoded leniently and S taken as any 256-bit integer.
"""

from __future__ import annotations

import hashlib

P = 2**255 - 19
"""The field prime p."""
L = 2**252 + 27742317777372353535851937790883648493
"""The order of the base point B (the prime subgroup)."""
D = -121665 * pow(121666, P - 2, P) % P
"""The curve constant d = -121665/121666 mod p."""
SQRT_M1 = pow(2, (P - 1) // 4, P)
"""A square root of -1 mod p (section 5.1.3, step 3)."""

Point = tuple[int, int, int, int]
IDENTITY: Point = (0, 1, 1, 0)


def add(p1: Point, p2: Point) -> Point:
    """p1 + p2, by the complete addition formulas of section 5.1.4 (doubling included)."""
    x1, y1, z1, t1 = p1
    x2, y2, z2, t2 = p2
    a = (y1 - x1) * (y2 - x2) % P
    b = (y1 + x1) * (y2 + x2) % P
    c = 2 * t1 * t2 * D % P
    dd = 2 * z1 * z2 % P
    e, f, g, h = b - a, dd - c, dd + c, b + a
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def mul(scalar: int, point: Point) -> Point:
    """[scalar]point for any scalar >= 0 (not reduced mod L); [0]point is the identity."""
    out = IDENTITY
    while scalar > 0:
        if scalar & 1:
            out = add(out, point)
        point = add(point, point)
        scalar >>= 1
    return out


def neg(point: Point) -> Point:
    """-point: (x, y) becomes (-x, y)."""
    x, y, z, t = point
    return (-x % P, y, z, -t % P)


def equal(p1: Point, p2: Point) -> bool:
    """Whether the two represent the same affine point (their Z may differ)."""
    x1, y1, z1, _ = p1
    x2, y2, z2, _ = p2
    return (x1 * z2 - x2 * z1) % P == 0 and (y1 * z2 - y2 * z1) % P == 0


def is_small_order(point: Point) -> bool:
    """Whether [8]point is the identity (the point lies in the torsion subgroup)."""
    return equal(mul(8, point), IDENTITY)


def recover_x(y: int, sign: int, *, negative_zero: bool = False) -> int | None:
    """The x of the point with this y and sign bit, or None (RFC 8032 section 5.1.3).

    None when y >= p, when no x exists, or when x = 0 and the sign bit is set;
    ``negative_zero`` accepts that last case (x = 0), as donna does.
    """
    if y >= P:
        return None
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    if x2 == 0:
        return 0 if negative_zero or not sign else None
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P:
        return None
    if (x & 1) != sign:
        x = P - x
    return x


def decode_point(data: bytes, *, canonical: bool = True) -> Point | None:
    """The point these 32 bytes encode, or None (RFC 8032 section 5.1.3).

    With ``canonical=False`` the encoding is read as donna reads it: y is taken
    modulo p and x = 0 with the sign bit set is accepted.
    """
    value = int.from_bytes(data, "little")
    sign = value >> 255
    y = value & ((1 << 255) - 1)
    if not canonical:
        y %= P
    x = recover_x(y, sign, negative_zero=not canonical)
    if x is None:
        return None
    return (x, y, 1, x * y % P)


def encode_point(point: Point) -> bytes:
    """The canonical 32-byte encoding (RFC 8032 section 5.1.2)."""
    x, y, z, _ = point
    zi = pow(z, P - 2, P)
    x, y = x * zi % P, y * zi % P
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


def point_with_y(y: int, sign: int = 0) -> Point:
    """The point with this y (0 <= y < p) and this parity of x; ValueError if there is none."""
    x = recover_x(y, sign)
    if x is None:
        raise ValueError(f"no curve point has y = {y} and sign {sign}")
    return (x, y, 1, x * y % P)


BASE = point_with_y(4 * pow(5, P - 2, P) % P)
"""The base point B: y = 4/5, x even (RFC 8032 section 5.1)."""


def _find_order8() -> Point:
    """A point of order 8: [L]Q for the first Q (x even; y = 2, 3, ...) where that has order 8."""
    y = 2
    while True:
        x = recover_x(y, 0)
        if x is not None:
            torsion = mul(L, (x, y, 1, x * y % P))
            if not equal(mul(4, torsion), IDENTITY):
                return torsion
        y += 1


T8 = _find_order8()
"""A point of order 8; its multiples are the whole torsion subgroup."""
TORSION: list[Point] = [mul(i, T8) for i in range(8)]
"""The eight points of small order, [i]T8 for i = 0..7."""


def _small_order_encodings() -> list[bytes]:
    """Every 32-byte string that decodes (as donna does) to a point of small order.

    The canonical encodings of the eight torsion points, the sign-bit variants
    of the two with x = 0, and the non-canonical y = p and y = p + 1 forms:
    the fourteen strings of libsodium's blocklist (seven, up to the sign bit).
    """
    out = {encode_point(t) for t in TORSION}
    for y in (1, P - 1, P, P + 1):
        for sign in (0, 1):
            out.add((y | (sign << 255)).to_bytes(32, "little"))
    found = sorted(
        e for e in out if (pt := decode_point(e, canonical=False)) and is_small_order(pt)
    )
    assert len(found) == 14
    return found


SMALL_ORDER_ENCODINGS = _small_order_encodings()
"""The fourteen small-order encodings, sorted."""


def secret_scalar(seed: bytes) -> int:
    """The secret scalar s of a 32-byte seed: SHA-512's first half, pruned (section 5.1.5)."""
    h = bytearray(hashlib.sha512(seed).digest()[:32])
    h[0] &= 248
    h[31] &= 127
    h[31] |= 64
    return int.from_bytes(h, "little")


def challenge(r: bytes, a: bytes, message: bytes) -> int:
    """k = SHA-512(R || A || M) mod L, as encoded bytes (section 5.1.7; pure Ed25519, no dom2)."""
    return int.from_bytes(hashlib.sha512(r + a + message).digest(), "little") % L


def _r_from_equation(a: Point, public: bytes, signature: bytes, message: bytes) -> bytes:
    """The encoding of [S]B - [k]A, which a valid signature carries as its R."""
    r_bytes, s = signature[:32], int.from_bytes(signature[32:], "little")
    k = challenge(r_bytes, public, message)
    return encode_point(add(mul(s, BASE), neg(mul(k, a))))


def strict_verify(public: bytes, signature: bytes, message: bytes) -> bool:
    """The library's policy, from the definition: libsodium's strict Ed25519.

    True only for a 32-byte key and a 64-byte signature with S < L, A and R
    canonical and not of small order, and R == encode([S]B - [k]A) as bytes.
    """
    if len(public) != 32 or len(signature) != 64:
        return False
    if int.from_bytes(signature[32:], "little") >= L:
        return False
    a = decode_point(public)
    r = decode_point(signature[:32])
    if a is None or r is None or is_small_order(a) or is_small_order(r):
        return False
    return _r_from_equation(a, public, signature, message) == signature[:32]


def donna_verify(public: bytes, signature: bytes, message: bytes) -> bool:
    """ed25519-donna's acceptance rule: only the top three bits of S, no point checks.

    A is decoded leniently (``canonical=False``); R is not decoded, only
    compared as bytes with encode([S]B - [k]A).
    """
    if signature[63] & 0xE0:
        return False
    a = decode_point(public, canonical=False)
    if a is None:
        return False
    return _r_from_equation(a, public, signature, message) == signature[:32]


def cofactorless_equation_holds(public: bytes, signature: bytes, message: bytes) -> bool:
    """Whether [S]B == R + [k]A as points, with no canonicity, range or small-order checks.

    A and R are decoded leniently (``canonical=False``) and S is the whole
    second half as an integer; False only when A or R is not on the curve or
    the equation fails.
    """
    a = decode_point(public, canonical=False)
    r = decode_point(signature[:32], canonical=False)
    if a is None or r is None:
        return False
    s = int.from_bytes(signature[32:], "little")
    k = challenge(signature[:32], public, message)
    return equal(mul(s, BASE), add(r, mul(k, a)))
