"""User text shown as the characters it is (a run's name, an error message): Markdown would
otherwise render it — an image link in a run's name would make every viewer's browser fetch
it."""
from __future__ import annotations

_MARKDOWN_SPECIALS = set("\\`*_{}[]()#+-.!|<>~:$&")


def plain(text: object) -> str:
    """User text (a run's name, an error) shown as the characters it is: every Markdown,
    shortcode or LaTeX sign escaped, so a name like ``![p](http://host/x.png)`` makes no
    browser fetch anything."""
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIALS else ch for ch in str(text))


__all__ = ["plain"]
