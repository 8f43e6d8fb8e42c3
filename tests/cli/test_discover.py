"""``simplex-rpc discover URL``: a website's addresses and what their links declare.

Rules pinned (the protocol text): the caller "reads the addresses from the
website", the ``## Communications`` section of llms.txt ("Addresses in
llms.txt"); "retrieves the link data with the link, without connecting"
(``/_connect plan``); and "the values in the public group record and in the
address link data take precedence over the values on a website" ("Contact
address peers"). The website is a local HTTPS server on 127.0.0.1 with a
self-signed certificate the test trusts (``--cacert``); the core is the
simulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from simplex_rpc.adapter import ChatCore
from simplex_rpc.cli import main
from simplex_rpc.cli._discover import llms_txt_url
from simplex_rpc.testing import CoreSimulator

# -- the website --------------------------------------------------------------------------------


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key: (certificate, key) PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@dataclass
class Site:
    """The local website: ``pages`` maps a path to its body, ``redirects`` a path to a
    ``Location``; ``url`` is its root."""

    url: str
    cacert: str
    pages: dict[str, bytes]
    release: threading.Event
    redirects: dict[str, str] = field(default_factory=dict)


def _handler(site: Callable[[], Site]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            s = site()
            if self.path == "/slow/llms.txt":  # answers nothing until the test ends
                s.release.wait(30)
                return
            if self.path == "/endless/llms.txt":  # no Content-Length, more than any limit
                self.send_response(200)
                self.end_headers()
                with contextlib.suppress(OSError):
                    for _ in range(64):
                        self.wfile.write(b"x" * 16384)
                return
            if self.path == "/huge/llms.txt":  # declares its size
                self.send_response(200)
                self.send_header("Content-Length", str(50_000_000))
                self.end_headers()
                return
            if self.path in s.redirects:
                self.send_response(301)
                self.send_header("Location", s.redirects[self.path])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = s.pages.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    cert, key = self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    holder: list[Site] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(lambda: holder[0]))
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    port = server.server_address[1]
    holder.append(Site(f"https://127.0.0.1:{port}", str(cert), {}, threading.Event()))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        holder[0].release.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


async def run_in_thread(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The command in a thread of its own (its own event loop), while the simulator runs."""
    code = await asyncio.to_thread(main, argv)
    out, _err = capsys.readouterr()
    return code, out


# -- the world: a channel, a group and a business contact -----------------------------------------

MCP = {"versions": ["2025-06-18"], "transports": {"chat": True, "rpc": True}}


@dataclass
class Links:
    channel: str
    group: str
    contact: str


@contextlib.asynccontextmanager
async def world() -> Any:
    """Acme's channel (audience people and agents, weekly), group (for people) and business
    contact (serves agents, declares MCP on both transports), as the simulator makes them."""
    async with CoreSimulator() as sim, ChatCore.connect(sim.url_for("news")) as news:
        await news.start(service_requests=False)
        channel_id = sim.create_group("Acme news", "news", [])[("news", 1)]
        profile = {
            "displayName": "Acme news",
            "fullName": "",
            "publicGroup": {"audience": ["human", "agent"], "changeFrequency": "weekly"},
        }
        await news.command(f"/_group_profile #{channel_id} {json.dumps(profile)}")
        group_id = sim.create_group("Acme customers", "shop", [])[("shop", 1)]
        sim.set_profile(
            "bot", {"displayName": "Ask Acme", "preferences": {"protocols": {"mcp": MCP}}}
        )
        address = sim.create_address("bot", pq_ratchet=True, settings={"businessAddress": True})
        sim.set_link_data(address["connShortLink"], serves=["agent"])
        yield (
            sim,
            Links(
                channel=sim.group_link("news", channel_id),
                group=sim.group_link("shop", group_id),
                contact=address["connShortLink"],
            ),
        )


def llms_txt(
    links: Links, contact_notes: str = "SimpleX business contact for agents, MCP"
) -> bytes:
    return (
        "# Acme\n\n> Acme sells things.\n\n"
        "## Docs\n\n- [API](https://acme.example/api): the API\n\n"
        "## Communications\n\n"
        f"- [Acme news]({links.channel}): SimpleX updates for people and agents, weekly."
        " Product news.\n"
        f"- [Acme customers]({links.group}): SimpleX group for people. Questions and tips.\n"
        f"- [Ask Acme]({links.contact}): {contact_notes}. Orders.\n"
        "- [Acme support](mailto:support@acme.example): Email contact for people.\n"
    ).encode()


@pytest.mark.anyio
async def test_a_website_with_a_channel_a_group_and_a_contact(
    site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    async with world() as (sim, links):
        site.pages["/llms.txt"] = llms_txt(links)
        argv = ["discover", site.url, "--core", sim.url_for("reader"), "--cacert", site.cacert]
        code, out = await run_in_thread([*argv, "--json"], capsys)
        assert code == 0, out
        found = json.loads(out)
        assert found["url"] == site.url + "/llms.txt" and found["problems"] == []
        news, customers, ask, support = found["addresses"]

        assert (news["type"], news["audience"], news["frequency"]) == (
            "updates",
            ["human", "agent"],
            "weekly",
        )
        assert (news["source"], news["name"], news["disagreements"]) == (
            "link",
            "Acme news",
            [],
        )
        # The simulator's group links are all /g#: the real core gives a channel a /c#
        # link, which the protocol text requires for an updates entry. The rule is shown.
        assert "requires a channel link" in news["problem"]

        assert (customers["type"], customers["audience"], customers["protocols"]) == (
            "group",
            ["human"],
            [],
        )
        assert customers["disagreements"] == [] and customers["problem"] is None

        assert (ask["type"], ask["audience"], ask["source"]) == (
            "business contact",
            ["agent"],
            "link",
        )
        assert ask["protocols"] == [
            {"name": "mcp", "versions": ["2025-06-18"], "transports": ["chat", "rpc"]}
        ]
        assert ask["disagreements"] == [] and ask["error"] is None

        assert (support["network"], support["source"], support["error"]) == (
            "Email",
            None,
            None,
        )

        code, out = await run_in_thread(argv, capsys)
        assert code == 0
        lines = out.splitlines()
        assert lines[0] == f"{site.url}/llms.txt: 4 addresses"
        assert lines[1].split() == ["ADDRESS", "TYPE", "AUDIENCE", "PROTOCOLS"]
        row = next(line for line in lines if line.startswith("Ask Acme"))
        assert "business contact" in row and "agent" in row
        assert "mcp 2025-06-18 (chat+rpc)" in row
        assert any(line.startswith("Acme news") and "(weekly)" in line for line in lines)



@pytest.mark.anyio
async def test_link_data_takes_precedence_and_a_disagreement_is_shown(
    site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    """The website says a contact for people serving MCP and A2A; the link data says a
    business address for agents declaring MCP alone."""

    async with world() as (sim, links):
        site.pages["/llms.txt"] = llms_txt(links, "SimpleX contact for people, MCP, A2A")
        argv = ["discover", site.url, "--core", sim.url_for("reader"), "--cacert", site.cacert]
        code, out = await run_in_thread([*argv, "--json"], capsys)
        assert code == 0
        ask = json.loads(out)["addresses"][2]
        assert (ask["type"], ask["audience"]) == ("business contact", ["agent"])
        assert [p["name"] for p in ask["protocols"]] == ["mcp"]
        assert ask["website"]["audience"] == "people"
        assert ask["disagreements"] == [
            "business: the website says a contact, the link data a business address",
            "audience: the website says people, the link data agent",
            "protocols: the website lists mcp, a2a, the link data declares mcp",
        ]
        code, out = await run_in_thread(argv, capsys)
        assert (
            "  differs: audience: the website says people, the link data agent;"
            " the link data's value is shown"
        ) in out.splitlines()



@pytest.mark.anyio
async def test_a_link_the_core_cannot_read_keeps_its_error_and_the_rest_are_read(
    site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    async with world() as (sim, links):
        unknown = "https://smp.example/c#AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
        site.pages["/llms.txt"] = llms_txt(
            Links(channel=unknown, group=links.group, contact=links.contact)
        )
        argv = ["discover", site.url, "--core", sim.url_for("reader"), "--cacert", site.cacert]
        code, out = await run_in_thread([*argv, "--json"], capsys)
        assert code == 0
        news, customers, ask, _support = json.loads(out)["addresses"]
        assert news["source"] is None and "invalidConnReq" in news["error"]
        assert news["problem"] is None  # a channel link, as the rule requires
        assert (customers["source"], ask["source"]) == ("link", "link")



def test_without_a_core_the_websites_entries_are_shown(
    site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    links = Links(
        channel="https://smp.example/c#AAAA",
        group="https://smp.example/g#BBBB",
        contact="https://smp.example/a#CCCC",
    )
    site.pages["/site/llms.txt"] = llms_txt(links)
    code, out, _ = run(["discover", site.url + "/site/", "--cacert", site.cacert], capsys)
    assert code == 0
    assert out.count("  link data: not read (no --core)") == 3
    code, out, _ = run(["discover", site.url + "/site", "--cacert", site.cacert, "--json"], capsys)
    ask = json.loads(out)["addresses"][2]
    assert (ask["type"], ask["audience"], ask["source"]) == ("business contact", ["agent"], None)
    assert ask["protocols"] == [{"name": "mcp", "versions": None, "transports": None}]


# -- what the website can get wrong -------------------------------------------------------------


def test_a_missing_section(site: Site, capsys: pytest.CaptureFixture[str]) -> None:
    site.pages["/llms.txt"] = b"# Acme\n\n## Docs\n\n- [API](https://acme.example/api): the API\n"
    code, out, _ = run(["discover", site.url, "--cacert", site.cacert], capsys)
    assert code == 1
    assert out == (
        f"{site.url}/llms.txt: no addresses (no ## Communications section, or an empty one)\n"
    )
    code, out, _ = run(["discover", site.url, "--cacert", site.cacert, "--json"], capsys)
    assert code == 1 and json.loads(out)["addresses"] == []


def test_lines_off_the_grammar_are_reported(site: Site, capsys: pytest.CaptureFixture[str]) -> None:
    site.pages["/llms.txt"] = (
        b"## Communications\n\n- [Ask](https://smp.example/a#CCCC): SimpleX contact for robots.\n"
        b"- [Mail](mailto:a@acme.example): Email contact for people.\n"
    )
    code, out, _ = run(["discover", site.url, "--cacert", site.cacert], capsys)
    assert code == 0
    assert out.splitlines()[0].endswith(": 1 address")
    assert "llms.txt line 3: the audience 'robots.' is not people" in out


@pytest.mark.parametrize("path", ["/huge", "/endless"])
def test_a_response_too_large(site: Site, capsys: pytest.CaptureFixture[str], path: str) -> None:
    """Refused by its declared length, or as the body streams past the limit."""
    argv = ["discover", site.url + path, "--cacert", site.cacert, "--max-bytes", "65536"]
    code, out, err = run(argv, capsys)
    assert (code, out) == (2, "")
    assert "over the limit of 65536" in err and len(err.splitlines()) == 1


def test_a_timeout(site: Site, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["discover", site.url + "/slow", "--cacert", site.cacert, "--timeout", "0.5"]
    code, out, err = run(argv, capsys)
    assert (code, out) == (2, "")
    assert err == (
        f"simplex-rpc discover: {site.url}/slow/llms.txt:"
        " no complete answer within 0.5 s (--timeout)\n"
    )


def test_an_untrusted_certificate_is_refused(
    site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    site.pages["/llms.txt"] = b"## Communications\n"
    code, _out, err = run(["discover", site.url], capsys)
    assert code == 2 and "CERTIFICATE_VERIFY_FAILED" in err


def test_redirects_are_followed_to_https_only(
    site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    site.pages["/llms.txt"] = b"\xef\xbb\xbf## Communications\n\n" + (
        b"- [Mail](mailto:a@acme.example): Email contact for people.\n"
    )
    site.redirects["/old/llms.txt"] = site.url + "/llms.txt"
    code, out, _ = run(["discover", site.url + "/old", "--cacert", site.cacert], capsys)
    assert code == 0 and out.splitlines()[0].endswith(": 1 address")  # the BOM is dropped
    plain = site.url.replace("https://", "http://")
    site.redirects["/plain/llms.txt"] = plain + "/llms.txt"
    code, out, err = run(["discover", site.url + "/plain", "--cacert", site.cacert], capsys)
    assert (code, out) == (2, "")
    assert "redirected to a URL that is not https (http)" in err and len(err.splitlines()) == 1
    for n in range(7):
        site.redirects[f"/loop{n}/llms.txt"] = f"{site.url}/loop{n + 1}/llms.txt"
    code, _out, err = run(["discover", site.url + "/loop0", "--cacert", site.cacert], capsys)
    assert code == 2 and "more than 5 redirects" in err


def test_a_page_that_is_not_there(site: Site, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run(["discover", site.url + "/nothing", "--cacert", site.cacert], capsys)
    assert (code, err.split(": ", 2)[2]) == (2, "the server answered HTTP 404\n")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://acme.example", "expected an https:// URL"),
        ("https://user:pw@acme.example", "must not carry credentials"),
        ("acme.example", "expected an https:// URL"),
    ],
)
def test_only_https_urls(url: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run(["discover", url], capsys)
    assert code == 2 and says in err and "pw" not in err


def test_the_llms_txt_of_a_url() -> None:
    assert llms_txt_url("https://acme.example") == "https://acme.example/llms.txt"
    assert llms_txt_url("https://acme.example/") == "https://acme.example/llms.txt"
    assert llms_txt_url("https://acme.example/docs/") == "https://acme.example/docs/llms.txt"
    assert llms_txt_url("https://acme.example/llms.txt") == "https://acme.example/llms.txt"
