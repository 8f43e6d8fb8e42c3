"""No secret leaks, and constant-time comparison of secrets (issue 7).

Private key material (the 32-byte seed, in hex or base64, the PKCS#8 DER,
the ``sign_key=`` text, or libsodium's 64-byte secret key) never appears in a
``SigningKey``'s repr or str, in any exception raised while a private key is
handled (its message, args, chained exceptions and formatted traceback), or
in the CLI's output, except ``keygen``, whose job is to print it.
``SigningKey`` equality compares seeds with ``hmac.compare_digest``, and key
equality compares bytes, never text.
"""

from __future__ import annotations

import base64
import copy
import hmac
import io
import pickle
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import nacl.bindings
import pytest

import simplex_rpc as sx
from _queues import QUEUE
from simplex_rpc import cli
from simplex_rpc._wire import keys as _keys

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = [pytest.mark.backend, pytest.mark.security]

SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
KEY = sx.SigningKey.from_seed(SEED)
TEXT = KEY.encode()
AD = bytes(range(112))


def secret_forms(seed: bytes) -> list[str]:
    """Every spelling of a private key that must not leak, as lowercase text."""
    key = sx.SigningKey.from_seed(seed)
    der = key.der
    _, libsodium_sk = nacl.bindings.crypto_sign_seed_keypair(seed)
    forms = [seed.hex(), der.hex(), libsodium_sk.hex(), key.encode()]
    for data in (seed, der, libsodium_sk):
        for enc in (base64.b64encode, base64.urlsafe_b64encode, base64.b32encode):
            text = enc(data).decode()
            forms += [text, text.rstrip("=")]
    forms.append(repr(seed)[2:-1])  # Python bytes repr
    # Any 12-character piece of the secret part of the key text (past the DER prefix).
    forms += [TEXT[i : i + 12] for i in range(22, len(TEXT) - 12)] if seed == SEED else []
    return [f.lower() for f in forms]


FORMS = secret_forms(SEED)


def assert_clean(text: str, forms: list[str] = FORMS) -> None:
    low = text.lower()
    for form in forms:
        assert form not in low, f"private key material ({form[:6]}...) in: {text[:200]!r}"


def exception_texts(exc: BaseException) -> Iterator[str]:
    """Everything an exception can show: str, repr, args, chained ones, the traceback."""
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        yield str(node)
        yield repr(node)
        yield from (repr(a) for a in node.args)
        node = node.__cause__ or node.__context__
    yield "".join(traceback.format_exception(exc))


# --------------------------------------------------------------------------
# The key object


def test_repr_str_format_show_no_key_material() -> None:
    for text in (repr(KEY), str(KEY), f"{KEY}", f"{KEY!r}", format(KEY), repr([KEY])):
        assert_clean(text)
    assert KEY.public_key.encode() in repr(KEY)


def test_key_object_has_no_dict_and_refuses_pickle_and_copy() -> None:
    assert not hasattr(KEY, "__dict__")
    for attempt in (
        lambda: pickle.dumps(KEY),
        lambda: copy.copy(KEY),
        lambda: copy.deepcopy(KEY),
    ):
        with pytest.raises(TypeError) as info:
            attempt()
        for text in exception_texts(info.value):
            assert_clean(text)


def test_key_is_immutable() -> None:
    with pytest.raises(AttributeError) as info:
        KEY._seed = bytes(32)  # type: ignore[misc]
    for text in exception_texts(info.value):
        assert_clean(text)


# --------------------------------------------------------------------------
# Exceptions raised while a private key is handled


def _text_mutations(text: str) -> Iterator[str]:
    """Truncations, every character replaced, deletions, insertions, doubled, wrapped."""
    for i in range(len(text)):
        yield text[:i]
        yield text[:i] + text[i + 1 :]
        for ch in ("!", " ", "=", "+", "/", "\n", "é", "\x00", "~"):
            yield text[:i] + ch + text[i + 1 :]
            yield text[:i] + ch + text[i:]
    for extra in ("=", "==", "A", "AAAA", "\n", " "):
        yield text + extra
        yield extra + text
    yield text + text
    yield text.upper()
    yield text.lower()
    yield text.replace("-", "+").replace("_", "/")
    yield f"-----BEGIN PRIVATE KEY-----\n{text}\n-----END PRIVATE KEY-----\n"


def _bit_flips(data: bytes) -> Iterator[bytes]:
    for bit in range(8 * len(data)):
        mutated = bytearray(data)
        mutated[bit // 8] ^= 1 << (bit % 8)
        yield bytes(mutated)


def _errors_of(decode: Callable[[object], object], inputs: Iterator[object]) -> list[BaseException]:
    errors: list[BaseException] = []
    for data in inputs:
        try:
            decode(data)
        except (sx.SimplexRpcError, TypeError) as exc:
            errors.append(exc)
    return errors


@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_decode_errors_of_mutated_private_key_text_carry_no_key(as_bytes: bool) -> None:
    inputs = (m.encode("utf-8", "surrogatepass") if as_bytes else m for m in _text_mutations(TEXT))
    errors = _errors_of(sx.SigningKey.decode, inputs)
    assert len(errors) > 500
    for exc in errors:
        assert isinstance(exc, sx.KeyFormatError)
        for text in exception_texts(exc):
            assert_clean(text)


def test_decode_errors_of_bit_flipped_key_text_carry_no_key() -> None:
    errors = _errors_of(sx.SigningKey.decode, _bit_flips(TEXT.encode()))
    assert errors
    for exc in errors:
        for text in exception_texts(exc):
            assert_clean(text)


def test_der_errors_carry_no_key() -> None:
    der = KEY.der
    inputs: list[object] = [der[:i] for i in range(len(der))]
    inputs += list(_bit_flips(der[:16]))
    inputs += [der + b"\x00", b"\x00" + der, SEED, SEED + SEED]
    errors = _errors_of(sx.SigningKey.from_der, iter(inputs))
    assert len(errors) == len(inputs)
    for exc in errors:
        for text in exception_texts(exc):
            assert_clean(text)


def test_seed_errors_carry_no_key() -> None:
    for data in (SEED[:31], SEED + b"\x00", SEED * 2, SEED.hex(), bytearray(SEED[:16])):
        with pytest.raises((sx.KeyFormatError, TypeError)) as info:
            sx.SigningKey.from_seed(data)  # type: ignore[arg-type]
        for text in exception_texts(info.value):
            assert_clean(text)


def test_public_key_errors_given_a_private_key_carry_no_key() -> None:
    """The private text where a public key belongs (a common mistake) is not echoed."""
    for decode in (sx.PublicKey.decode, lambda t: sx.PublicKey.from_der(
            base64.urlsafe_b64decode(t))):
        with pytest.raises(sx.KeyFormatError) as info:
            decode(TEXT)
        for text in exception_texts(info.value):
            assert_clean(text)
    envelope = b'{"protocol":"mcp","request":{},"requestKey":"' + TEXT.encode() + b'"}'
    with pytest.raises(sx.EnvelopeError) as einfo:
        sx.Request.parse(envelope)
    for text in exception_texts(einfo.value):
        assert_clean(text)


def test_signing_errors_carry_no_key() -> None:
    """Errors raised while signing or sealing with the key name sizes and AD, not the key."""
    attempts: list[Callable[[], object]] = [
        lambda: KEY.sign_request(b"", b"{}"),
        lambda: sx.seal_request(b"x" * 20_000, AD, KEY, reply_queue=QUEUE),
        lambda: sx.seal_request(b"{}", b"", KEY, reply_queue=QUEUE),
        lambda: KEY.sign_request(AD, "text"),  # type: ignore[arg-type]
        lambda: KEY.sign(None),  # type: ignore[arg-type]
    ]
    for attempt in attempts:
        with pytest.raises((sx.SimplexRpcError, TypeError)) as info:
            attempt()
        for text in exception_texts(info.value):
            assert_clean(text)


# --------------------------------------------------------------------------
# CLI output


def run_cli(argv: list[str], stdin: bytes = b"") -> tuple[int, str]:
    """Run the CLI in this process; return its exit status and everything it printed."""
    out, err = io.BytesIO(), io.BytesIO()
    wrappers = (
        io.TextIOWrapper(io.BytesIO(stdin)),
        io.TextIOWrapper(out, write_through=True),
        io.TextIOWrapper(err, write_through=True),
    )
    real = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = wrappers
    try:
        try:
            status = cli.main(argv)
        except SystemExit as exc:  # argparse usage errors
            status = exc.code if isinstance(exc.code, int) else 2
        for wrapper in wrappers[1:]:
            if not wrapper.closed:
                wrapper.flush()
        printed = out.getvalue() + err.getvalue()
    finally:
        sys.stdin, sys.stdout, sys.stderr = real
    return status, printed.decode("utf-8", "replace") + printed.hex()


def _cli_runs(tmp: Path) -> Iterator[tuple[list[str], bytes]]:
    key_file = tmp / "key.txt"
    key_file.write_text(TEXT + "\n")
    block = sx.seal_request(b'{"protocol":"mcp","request":{}}', AD, KEY, reply_queue=QUEUE)
    (tmp / "block").write_bytes(block)
    ad = AD.hex()
    payload = '{"protocol":"mcp","request":{}}'
    for spec, stdin in ((TEXT, b""), (f"@{key_file}", b""), ("-", TEXT.encode())):
        yield ["sign", "--key", spec, "--ad", ad, "--payload", payload], stdin
        yield ["sign", "--key", spec, "--ad", ad, "--payload", payload, "--json"], stdin
        yield ["sign", "--key", spec, "--raw", "--payload", payload], stdin
        yield ["seal", "request", "--key", spec, "--ad", ad, "--payload", payload, "--hex"], stdin
    yield ["open", "request", str(tmp / "block"), "--ad", ad, "--json"], b""
    yield ["open", "request", str(tmp / "block"), "--ad", ad], b""
    yield ["verify", "--key", KEY.public_key.encode(), "--ad", ad, "--payload", payload,
           "--signature", KEY.sign_request(AD, payload.encode()).hex()], b""
    # The private key where a public one belongs, and mutated private keys.
    yield ["verify", "--key", TEXT, "--ad", ad, "--payload", payload,
           "--signature", "00" * 64], b""
    for bad in (TEXT[:-1], TEXT[:30], TEXT + "A", TEXT[:20] + "!" + TEXT[21:], TEXT.upper(),
                TEXT[:40] + " " + TEXT[40:]):
        yield ["sign", "--key", bad, "--ad", ad, "--payload", payload], b""
        yield ["seal", "request", "--key", bad, "--ad", ad, "--payload", payload, "--hex"], b""
    # The adapter's call, refused before or at the (closed) core: no key in its errors.
    for spec in (TEXT, TEXT[:40], TEXT + "!", f"@{key_file}"):
        yield ["call", "--core", "ws://127.0.0.1:9", "--sign-key", spec, "--request-key",
               "simplex:/a#k", "mcp", "{}"], b""
    # A missing AD or payload file while the key is given.
    yield ["sign", "--key", TEXT, "--ad", "@/nonexistent/ad", "--payload", payload], b""
    yield ["sign", "--key", TEXT, "--ad", "zz", "--payload", payload], b""
    yield ["seal", "request", "--key", TEXT, "--ad", ad, "--payload", "x" * 20_000, "--hex"], b""


def test_cli_prints_no_private_key(tmp_path: Path) -> None:
    """Every command given the private key prints none of it (keygen excepted, below)."""
    statuses = []
    for argv, stdin in _cli_runs(tmp_path):
        status, printed = run_cli(argv, stdin)
        statuses.append(status)
        assert_clean(printed)
    assert 0 in statuses and 2 in statuses  # both successes and refusals were scanned


def test_cli_demo_prints_no_private_key() -> None:
    from simplex_rpc.cli import _demo

    forms = secret_forms(_demo.demo_signing_key().seed())
    for argv in (["demo"], ["demo", "--json"]):
        status, printed = run_cli(argv)
        assert status == 0
        assert_clean(printed, forms)


def test_cli_keygen_prints_the_key_only_when_asked(tmp_path: Path) -> None:
    """keygen's job is the private key: it prints it, or with -o writes it to a file only."""
    status, printed = run_cli(["keygen", "--seed", SEED.hex()])
    assert status == 0 and TEXT in printed
    target = tmp_path / "new.key"
    status, printed = run_cli(["keygen", "--seed", SEED.hex(), "-o", str(target)])
    assert status == 0
    assert TEXT in target.read_text()
    # With -o the key goes to the file; the seed the user typed is theirs, but the
    # private key text is not printed.
    assert TEXT.lower() not in printed.lower()


# --------------------------------------------------------------------------
# Timing: constant-time comparison of secrets, bytes not text


class _Spy:
    def __init__(self, answer: bool | None = None) -> None:
        self.calls: list[tuple[object, object]] = []
        self.answer = answer
        self.real = hmac.compare_digest

    def __call__(self, a: object, b: object) -> bool:
        self.calls.append((a, b))
        real = self.real(a, b)  # type: ignore[arg-type]
        return real if self.answer is None else self.answer


def test_signing_key_equality_uses_compare_digest_on_seed_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = sx.SigningKey.from_seed(bytes(32))
    spy = _Spy()
    monkeypatch.setattr(_keys.hmac, "compare_digest", spy)
    assert KEY == sx.SigningKey.decode(TEXT)
    assert KEY != other
    assert spy.calls == [(SEED, SEED), (SEED, bytes(32))]
    assert all(isinstance(a, bytes) and isinstance(b, bytes) for a, b in spy.calls)


def test_signing_key_equality_is_decided_by_compare_digest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The verdict is compare_digest's: no short-cut comparison before or after it."""
    other = sx.SigningKey.from_seed(bytes(32))
    monkeypatch.setattr(_keys.hmac, "compare_digest", _Spy(answer=True))
    assert KEY == other
    monkeypatch.setattr(_keys.hmac, "compare_digest", _Spy(answer=False))
    assert KEY != sx.SigningKey.from_seed(SEED)


def test_public_key_equality_and_request_key_check_compare_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """requestKey against the signer: bytes, through compare_digest, padded or not."""
    public = KEY.public_key
    unpadded = sx.PublicKey.decode(public.encode().rstrip("="))
    spy = _Spy()
    monkeypatch.setattr(_keys.hmac, "compare_digest", spy)
    request = sx.Request.parse(
        b'{"protocol":"mcp","request":{},"requestKey":"'
        + public.encode().rstrip("=").encode() + b'"}'
    )
    assert sx.check_request_key(request, public) is None
    assert unpadded == public
    assert spy.calls and all(
        isinstance(a, bytes) and isinstance(b, bytes) and len(a) == 32 for a, b in spy.calls
    )

