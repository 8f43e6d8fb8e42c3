"""Every relative link in README.md and docs/*.md resolves, anchors included (issue 17).

Issue 17: "A test checks that every relative link in README.md and docs/
resolves, anchors included." A link is relative when it names no scheme
(``https:``, ``mailto:``): a path from the page's own folder, an anchor
(``#section``) in the page itself, or both. The path must name a file or a
folder inside the repository; an anchor must be the slug of a heading of the
target page, computed as GitHub computes it (lowercase; every character that
is not a letter, a digit, a space, ``-`` or ``_`` dropped; each space a
``-``; a repeated slug gets ``-1``, ``-2``, ...). Links and headings inside
code (fenced blocks and inline spans) are not Markdown and are not read.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target) or [text](target "title"); images (![alt](src)) too.
INLINE_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# A reference definition: [label]: target
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def prose_lines(text: str) -> list[str]:
    """The page's lines outside fenced code blocks, with inline code spans blanked."""
    lines: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        match = FENCE.match(line)
        if match is not None:
            if fence is None:
                fence = match.group(1)
            elif match.group(1) == fence:
                fence = None
            lines.append("")
            continue
        lines.append("" if fence is not None else line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (the github-slugger rule)."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)  # code keeps its text
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a link can name in ``page``: its headings' slugs, and HTML anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    text = page.read_text("utf-8")
    for line in prose_lines(text):
        match = HEADING.match(line)
        if match is not None:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(HTML_ANCHOR.findall(line))
    return found


def relative_links(page: Path) -> list[tuple[int, str]]:
    """``(line number, target)`` of every relative link of ``page``."""
    links: list[tuple[int, str]] = []
    for number, line in enumerate(prose_lines(page.read_text("utf-8")), 1):
        line = CODE_SPAN.sub("code", line)
        targets = INLINE_LINK.findall(line)
        reference = REFERENCE.match(line)
        if reference is not None:
            targets.append(reference.group(1))
        links.extend((number, t) for t in targets if not SCHEME.match(t))
    return links


def broken_links(page: Path) -> list[str]:
    """One line per relative link of ``page`` that does not resolve, naming where and why."""
    problems: list[str] = []
    name = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
    for number, target in relative_links(page):
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        where = f"{name}:{number}: {target}"
        if not dest.is_relative_to(ROOT) and page.is_relative_to(ROOT):
            problems.append(f"{where}: leaves the repository")
        elif not dest.exists():
            problems.append(f"{where}: no such file")
        elif anchor:
            if dest.is_dir() or dest.suffix != ".md":
                problems.append(f"{where}: an anchor into a page that is not Markdown")
            elif anchor not in anchors(dest):
                problems.append(f"{where}: no heading with the anchor #{anchor} in {dest.name}")
    return problems


def test_the_pages_are_there() -> None:
    names = {p.name for p in PAGES}
    assert {"README.md", "glossary.md", "examples.md", "cli.md", "performance.md"} <= names
    assert "HELPERS.md" not in names  # issue 17: "Delete docs/HELPERS.md"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_front_page_links_to_every_doc_page() -> None:
    """README's table of the docs names each page of docs/ (the PyPI description aside)."""
    linked = {t.partition("#")[0] for _, t in relative_links(ROOT / "README.md")}
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")} - {"docs/pypi.md"}
    assert pages <= linked, sorted(pages - linked)


# -- the checker itself ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("What it is", "what-it-is"),
        ("1. Keys", "1-keys"),
        ("4. Frame (ours)", "4-frame-ours"),
        ("`simplex_rpc.declarations`", "simplex_rpcdeclarations"),
        ("Before touching `csrc/`: `make sanitize`", "before-touching-csrc-make-sanitize"),
        ("The chat transport: a `/_call` bot and a caller",
         "the-chat-transport-a-_call-bot-and-a-caller"),
        ("`A2aBridge`: yes, a2a-sdk 1.x answers one request without HTTP",
         "a2abridge-yes-a2a-sdk-1x-answers-one-request-without-http"),
        ("Under load and faults: what `serve` guarantees",
         "under-load-and-faults-what-serve-guarantees"),
        ("The package's layout", "the-packages-layout"),
    ],
)
def test_slugs_are_githubs(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_the_checker_finds_each_kind_of_broken_link(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## Same\n\n## Same\n", "utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n"
        "[ok](other.md) [ok](other.md#same-1) [ok](#page) [web](https://example.com/x#y)\n"
        "[gone](missing.md)\n"
        "[bad anchor](other.md#nowhere)\n"
        "[bad self](#nowhere)\n"
        "`[in code](missing.md)`\n"
        "```\n[in a fence](missing.md)\n## not a heading\n```\n"
        "[ref]: also-missing.md\n",
        "utf-8",
    )
    assert broken_links(page) == [
        f"{page}:4: missing.md: no such file",
        f"{page}:5: other.md#nowhere: no heading with the anchor #nowhere in other.md",
        f"{page}:6: #nowhere: no heading with the anchor #nowhere in page.md",
        f"{page}:12: also-missing.md: no such file",
    ]
