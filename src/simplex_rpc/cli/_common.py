"""What every command group of the CLI shares: exit statuses, errors, input and output.

Errors are one line on stderr with exit status 2, never a traceback
(:class:`CliError`, :func:`fail`); ``--json`` output is for programs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import re
import signal
import stat
import sys
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Final, NoReturn

from .._bindings import BindingError, header_field
from .._wire import strict_json as _json
from .._wire.redact import REDACTED, redact
from ..errors import KeyFormatError

if TYPE_CHECKING:
    from .._wire.keys import PublicKey, SigningKey

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A user-facing failure: printed as one line, exit status 2."""


def fail(message: str) -> NoReturn:
    """Stop the command with ``message`` (one line on stderr, exit status 2)."""
    raise CliError(message)


def _read_path(path: str, what: str | None) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        prefix = "" if what is None else f"{what}: "
        fail(f"{prefix}cannot read {path!r}: {exc.strerror}")


def read_file(path: str, *, what: str | None = None) -> bytes:
    """Read the file at ``path`` (``-`` is stdin); a failure names ``what``, if given."""
    if path == "-":
        return sys.stdin.buffer.read()
    return _read_path(path, what)


def read_input(spec: str, *, what: str) -> bytes:
    """Read ``spec``: ``-`` is stdin, ``@PATH`` a file, anything else the literal text."""
    if spec == "-":
        return sys.stdin.buffer.read()
    if spec.startswith("@"):
        return _read_path(spec[1:], what)
    try:
        return spec.encode("utf-8")
    except UnicodeEncodeError:
        fail(f"{what}: the argument is not valid UTF-8")


def load_json(spec: str, *, what: str) -> Any:
    """Read ``spec`` as ``read_input`` does and decode it as strict JSON.

    Text that is not JSON fails with the decoder's message, after ``what``.
    """
    try:
        return _json.loads(read_input(spec, what=what))
    except _json.JsonError as exc:
        fail(f"{what}: {exc}")


def emit_json(value: Any) -> None:
    """Print ``value`` on stdout as indented JSON (non-ASCII kept), one newline after."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False) + "\n")


def whole_number(minimum: int, too_small: str) -> Callable[[str], int]:
    """An argparse ``type=``: a whole number of at least ``minimum``.

    Other text, or a smaller number, is a usage error (exit status 2); ``too_small``
    is the message for a smaller number, with ``{value}`` standing for it.
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(too_small.format(value=value))
        return value

    return parse


def positive_seconds(text: str) -> float:
    """An argparse ``type=``: a positive, finite number of seconds.

    Other text (echoed at most 32 characters), zero, a negative number, inf or
    nan is a usage error (exit status 2).
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:32]!r} is not a number") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


# -- ready lines, logs and signals (issue 22) -------------------------------------------

ReadyValue = str | Sequence[str] | None


def add_ready_option(parser: argparse.ArgumentParser) -> None:
    """Give a serving subcommand ``--json`` (``args.json``): its ready lines as one object."""
    parser.add_argument(
        "--json", action="store_true", help="print the ready lines as one JSON object"
    )


def ready(args: argparse.Namespace, **fields: ReadyValue) -> None:
    """Print the ready lines on stdout, flushed: call once, when the command serves.

    One ``key: value`` line per field, in the order given (a sequence value joined
    with ", ", a None value left out), so that ``sed -n 's/^address: //p'`` or a
    program reading lines finds them. With ``args.json`` (the ``--json`` flag of
    :func:`add_ready_option`) the fields are one JSON object on one line instead
    (a sequence stays a list). The keys in use: ``address`` (a contact link),
    ``serving`` (the protocols) and ``listening`` (a URL). Human logs go to stderr.
    """
    shown = {key: value for key, value in fields.items() if value is not None}
    if getattr(args, "json", False) is True:
        line = json.dumps(
            {k: v if isinstance(v, str) else list(v) for k, v in shown.items()},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        sys.stdout.write(line + "\n")
    else:
        for key, value in shown.items():
            text = value if isinstance(value, str) else ", ".join(value)
            sys.stdout.write(f"{key}: {text}\n")
    sys.stdout.flush()


LOG_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
"""The values of ``--log-level``, an option of every command."""

_chosen_level: int | None = None
_secrets: set[str] = set()

# A URL's query (its parameters may be credentials: ?token=, ?api_key=, ?sig=) and user part.
_URL_WITH_QUERY: Final = re.compile(r"(?i)\b((?:https?|wss?)://[^\s?#\"'<>]*)\?([^\s#\"'<>]*)")
_QUERY_VALUE: Final = re.compile(r"=[^&;]*")


def remember_secret(value: str) -> None:
    """Keep ``value`` (a header value, an environment value from a file) out of every log
    line the CLI writes: each occurrence is written ``<redacted>``."""
    if len(value) >= 4:  # shorter values would blank out ordinary words
        _secrets.add(value)


def redact_log_text(text: str) -> str:
    """``text`` as the CLI's log handlers write it: :func:`redact` (keys, credentials,
    a URL's user part), every URL's query values, and every remembered secret removed."""
    text = _URL_WITH_QUERY.sub(
        lambda m: (
            f"{m.group(1)}?{_QUERY_VALUE.sub('=' + REDACTED, m.group(2))}"
            if "=" in m.group(2)
            else f"{m.group(1)}?{REDACTED}"
        ),
        text,
    )
    text = redact(text)  # after: its <redacted> of a user part would end the URL above
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


class RedactingFormatter(logging.Formatter):
    """The formatter of every handler the CLI installs: the whole formatted record (its
    message, arguments and traceback, from any logger: httpx's INFO lines, the MCP
    client's DEBUG lines) passes through :func:`redact_log_text`."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_log_text(super().format(record))


def chosen_log_level() -> int | None:
    """The level of ``--log-level``, when the command line gave one."""
    return _chosen_level


def setup_logging(command: str, *, verbose: bool = False, level: int | str | None = None) -> None:
    """Send the library's log lines to stderr, each prefixed ``simplex-rpc COMMAND:``.

    Warnings always; informational lines (a serve's start, a proxy's connections)
    with ``verbose``; ``--log-level`` (``level``, or the one :func:`main` was given)
    decides when given, for every logger, third-party ones included. Every line
    is redacted (:class:`RedactingFormatter`). Stdout stays for the ready lines
    and the data of programs.
    """
    global _chosen_level
    if isinstance(level, str):
        level = LOG_LEVELS[level]
    if level is not None:
        _chosen_level = level
    chosen = (
        _chosen_level
        if _chosen_level is not None
        else (logging.INFO if verbose else logging.WARNING)
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter(f"simplex-rpc {command}: %(message)s"))
    root = logging.getLogger()
    remove_logging()
    handler._simplex_rpc_cli = True  # type: ignore[attr-defined]
    # The handler decides what is shown; a logger may still make INFO records for a
    # filter of the command's (serve's stop summary).
    handler.setLevel(chosen)
    root.addHandler(handler)
    root.setLevel(chosen)


def remove_logging() -> None:
    """Remove the handlers the CLI installed (marked ``_simplex_rpc_cli``), on the root
    logger and any other: a command run in-process ends."""
    loggers = [logging.getLogger()] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    for logger in loggers:
        for old in list(logger.handlers):
            if getattr(old, "_simplex_rpc_cli", False):
                logger.removeHandler(old)


def forget_log_choices() -> None:
    """Forget ``--log-level`` and the remembered secrets (the end of :func:`main`)."""
    global _chosen_level
    _chosen_level = None
    _secrets.clear()


def run_until_signal(
    main: Coroutine[Any, Any, Any],
    *,
    stopped: str | Callable[[], str | None] | None = None,
    stop: Callable[[], None] | None = None,
) -> int:
    """Run ``main`` in a new event loop; SIGTERM and SIGINT stop it gracefully: exit 0.

    ``stopped`` is the summary line printed on stderr after a stop by signal
    (or a function that returns it, called after the graceful stop): every
    long-running command ends a stop with one such line (docs/cli.md).
    ``stop``, when given, is the command's own graceful stop: the first signal
    calls it (``main`` then ends by itself) instead of cancelling ``main``.
    ``main``'s result is the exit status when it is an int (else 0).

    A signal cancels ``main``, which runs its graceful stop (the adapter's ``serve``
    does, on cancellation) and ends; the command then exits 0, as docker and
    systemd expect of a SIGTERM. A second signal during the stop cancels again,
    which stops at once. Outside the main thread (a test calling :func:`main` from
    a thread) no handler can be installed and the signals keep their defaults.
    """

    async def runner() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        signals: list[int] = []

        def on_signal(signum: int) -> None:
            signals.append(signum)
            if stop is not None and len(signals) == 1:
                stop()
            else:
                task.cancel()

        installed: list[int] = []
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.add_signal_handler(signum, on_signal, signum)
                    installed.append(signum)
                except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover
                    pass

        def summary() -> int:
            line = stopped() if callable(stopped) else stopped
            if line:
                print(line, file=sys.stderr, flush=True)
            return EXIT_OK

        try:
            try:
                result = await main
            except asyncio.CancelledError:
                if not signals:
                    raise
                task.uncancel()
                return summary()
            if signals:
                return summary()
            return result if isinstance(result, int) else EXIT_OK
        finally:
            for installed_signal in installed:
                loop.remove_signal_handler(installed_signal)

    return asyncio.run(runner())


def run_interruptible(run: Callable[[], int], *, stopped: str) -> int:
    """Run the synchronous command ``run``; SIGTERM and SIGINT stop it: ``stopped`` on
    stderr, exit 0 (the stop convention of docs/cli.md, for a command that runs
    event loops one after another, such as ``bench``).

    A signal raises ``KeyboardInterrupt`` where the command is (SIGTERM is passed on
    as SIGINT); each ``asyncio.run`` cancels its tasks on the way out. Tasks left
    with an exception that nobody will read any more (a core connection closed by
    the stop) are collected with asyncio's log silenced: the stop is not an error.
    """
    import gc

    installed = threading.current_thread() is threading.main_thread()
    previous: Any = None
    if installed:
        # SIGTERM as SIGINT: inside asyncio.run, its runner's SIGINT handler cancels the
        # main task and the loop closes in order; elsewhere KeyboardInterrupt is raised.
        previous = signal.signal(
            signal.SIGTERM, lambda signum, frame: signal.raise_signal(signal.SIGINT)
        )
    try:
        return run()
    except KeyboardInterrupt:
        logging.getLogger("asyncio").disabled = True
        gc.collect()
        print(stopped, file=sys.stderr, flush=True)
        return EXIT_OK
    finally:
        if installed:
            signal.signal(signal.SIGTERM, previous)


def refuse_if_readable_by_others(path: str, what: str) -> None:
    """Refuse, as ssh does, the private key file ``path`` when group or others can read it.

    ssh will not use such a key ("UNPROTECTED PRIVATE KEY FILE"): the key may already
    be another user's. The message names the file, its mode and the fix, never the key.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # the read names the problem
    if stat.S_ISREG(mode) and mode & 0o077:
        fail(
            f"{what}: the private key file {path!r} is readable by others (mode"
            f" {stat.S_IMODE(mode):04o}); a private key must be private, as ssh requires:"
            f" chmod 600 {path}"
        )


def read_signing_key(spec: str, *, what: str) -> SigningKey:
    """The private key of ``spec`` (text, ``@FILE`` or ``-``).

    A key file that group or others can read is refused, as ssh does (once it is
    known to hold a private key: a public key in it gets its own message).
    """
    key = decode_signing_key(read_input(spec, what=what), what=what)
    if spec.startswith("@"):
        refuse_if_readable_by_others(spec[1:], what)
    return key


# -- keys --------------------------------------------------------------------------------

_PRIVATE_HINT = "the private key text (sign_key=), as `simplex-rpc keygen --private` prints"
_PUBLIC_HINT = "the public key text (signerKey), as `simplex-rpc keygen --public` prints"


def _key_text(data: bytes, what: str, kind: str, hint: str) -> str:
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        fail(f"{what}: not ASCII text; expected {hint}")
    if not text:
        fail(f"{what}: empty; expected a {kind} key: {hint}")
    return text


def decode_signing_key(data: bytes, *, what: str) -> SigningKey:
    """The private key in ``data`` (its text); a public key or an empty input says so.

    Messages name what was expected, never the key's text.
    """
    from .._wire.keys import PublicKey, SigningKey

    text = _key_text(data, what, "private", _PRIVATE_HINT)
    try:
        return SigningKey.decode(text)
    except KeyFormatError as exc:
        try:
            PublicKey.decode(text)
        except KeyFormatError:
            fail(f"{what}: {exc}")
        fail(f"{what}: this is a public key; give the private key")


def decode_public_key(data: bytes, *, what: str) -> PublicKey:
    """The public key in ``data`` (its text); a private key or an empty input says so."""
    from .._wire.keys import PublicKey, SigningKey

    text = _key_text(data, what, "public", _PUBLIC_HINT)
    try:
        return PublicKey.decode(text)
    except KeyFormatError as exc:
        try:
            SigningKey.decode(text)
        except KeyFormatError:
            fail(f"{what}: {exc}")
        fail(f"{what}: this is a private key; give the public key")


def load_sign_key(spec: str, *, what: str = "--sign-key") -> SigningKey:
    """``--sign-key``: text, ``@FILE`` (refused when others can read it) or ``-``."""
    return read_signing_key(spec, what=what)


def install_hint(extra: str) -> str:
    """How to install the extra ``extra`` (:func:`simplex_rpc.errors.install_hint`)."""
    from ..errors import install_hint as hint

    return hint(extra)


def header_option(text: str) -> list[tuple[str, str]]:
    """An argparse ``type=`` for ``--header``: ``'Name: value'``, or ``@FILE`` of such lines.

    A file keeps the credential off the command line (where ``ps`` shows it to
    every user): one ``Name: value`` per line, blank lines and lines starting
    with ``#`` skipped. Errors name the file and the line, never a value. Each
    value is kept out of the CLI's logs (:func:`remember_secret`).
    """
    if not text.startswith("@"):
        pair = parse_header(text)
        remember_secret(pair[1])
        return [pair]
    path = text[1:]
    pairs = []
    for number, line in enumerate(_secret_lines(path, "--header"), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            pair = header_field(line.rstrip("\r"), "--header")
        except BindingError as exc:
            reason = str(exc).removeprefix("--header: ")
            raise argparse.ArgumentTypeError(f"{path!r} line {number}: {reason}") from None
        remember_secret(pair[1])
        pairs.append(pair)
    if not pairs:
        raise argparse.ArgumentTypeError(f"{path!r} holds no header ('Name: value' lines)")
    return pairs


_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_file(path: str) -> dict[str, str]:
    """An argparse ``type=`` for ``--env-file FILE``: the environment it sets for a child.

    One ``NAME=VALUE`` per line (``export NAME=VALUE`` too); blank lines and lines
    starting with ``#`` are skipped; the value is the rest of the line, without
    one pair of matching quotes around it (no escapes, no expansion). Errors name
    the file and the line, never a value. Each value is kept out of the CLI's logs.
    """
    env: dict[str, str] = {}
    for number, raw in enumerate(_secret_lines(path, "--env-file"), 1):
        line = raw.rstrip("\r").strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.removeprefix("export ").partition("=")
        name = name.strip()
        if not sep or _ENV_NAME.fullmatch(name) is None:
            raise argparse.ArgumentTypeError(
                f"{path!r} line {number}: expected NAME=VALUE (NAME of letters, digits and _)"
            )
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if "\0" in value:
            raise argparse.ArgumentTypeError(f"{path!r} line {number}: the value has a NUL")
        env[name] = value
        remember_secret(value)
    return env


def _secret_lines(path: str, what: str) -> list[str]:
    """The lines of a file of secrets (UTF-8); a failure is a usage error naming the file."""
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {path!r}: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise argparse.ArgumentTypeError(
            f"{path!r} is not UTF-8 text (byte offset {exc.start})"
        ) from None
    with contextlib.suppress(OSError):
        mode = os.stat(path).st_mode
        if stat.S_ISREG(mode) and mode & 0o077:
            print(
                f"simplex-rpc: warning: {what} file {path!r} is readable by others"
                f" (mode {stat.S_IMODE(mode):04o}); a file of credentials should be private:"
                f" chmod 600 {path}",
                file=sys.stderr,
            )
    return text.split("\n")


def parse_header(text: str) -> tuple[str, str]:
    """An argparse ``type=`` for ``--header 'Name: value'``: the pair ``(name, value)``.

    A name that is not an HTTP token, a missing colon or a value with control
    characters is a usage error (exit status 2), one line that never repeats
    the value (it may be a credential).
    """
    try:
        return header_field(text, "--header")
    except BindingError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--header: ")) from None


def listen_address(text: str) -> tuple[str, int]:
    """An argparse ``type=`` for ``--listen HOST:PORT`` (``[::1]:PORT`` for IPv6).

    ``PORT`` is 0 to 65535 (0 picks a free port). Other text is a usage error
    (exit status 2).
    """
    host, sep, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host:
        raise argparse.ArgumentTypeError(
            f"{text[:64]!r}: expected HOST:PORT, for example 127.0.0.1:0"
        )
    try:
        port = int(port_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{port_text[:16]!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is not from 0 to 65535")
    return host, port
