"""Every relative link in README.md and docs/*.md points to a file that exists, and every
``#anchor`` into a Markdown page names one of its headings (GitHub's slugs)."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: [text](target) and ![alt](target); a target ends at whitespace or the closing parenthesis
LINK = re.compile(r"!?\[[^\]]*\]\(\s*([^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")


def _links(page: Path) -> list[str]:
    text = CODE.sub("", FENCE.sub("", page.read_text()))
    return LINK.findall(text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {_slug(m) for m in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M)}


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)  # http:, https:, mailto:, ...


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_a_file_that_exists(page):
    broken = []
    for target in _links(page):
        if not _relative(target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_pages_link_to_each_other():
    """The README reaches every docs page, so none is orphaned."""
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in _links(ROOT / "README.md")
              if _relative(t) and t.partition("#")[0]}
    orphans = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not orphans, f"docs pages the README does not link: {orphans}"


def test_the_slugs_are_githubs():
    assert _slug("Coordinated omission: closed and open loop") == \
        "coordinated-omission-closed-and-open-loop"
    assert _slug("Let the server say where its time went: `Server-Timing`") == \
        "let-the-server-say-where-its-time-went-server-timing"
    assert _slug("A/B from the command line") == "ab-from-the-command-line"


def test_the_readme_starts_with_install_and_test():
    """The first thing a reader sees: install and open the dashboard, install and test."""
    first = re.search(r"^```\w*\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)
    assert first and first.group(1).splitlines() == [
        "pip install -r requirements.txt && streamlit run app.py",
        "pip install -r requirements-dev.txt && python -m pytest",
    ]


def test_the_readme_screenshot_is_a_1280x800_png():
    png = (ROOT / "docs" / "images" / "live-profiler.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (1280, 800)
