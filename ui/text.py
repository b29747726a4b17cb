"""User text (a run's name, an error message, a path) shown as the characters it is — by the one
helper for where it goes:

========================================================  ===============================
where the text goes                                       helper
========================================================  ===============================
Markdown: ``st.markdown``/``caption``/``info``/``error``,  ``plain`` (escapes every sign)
``toast``, widget *labels*, buttons, metric labels,
``st.radio`` and ``st.pills`` options
a select box's or multiselect's options                   ``option_text`` (as it is)
(``format_func``: Streamlit shows them as plain text)
a code span inside Markdown (```` `…` ````)               ``code_span`` (as it is)
a Plotly figure (trace names, ticks, hover)               ``latency.figures.text.as_text``
========================================================  ===============================

Markdown would otherwise render user text — an image link in a run's name would make every
viewer's browser fetch it — and escaping text that is *not* rendered as Markdown shows every
backslash (``image\\-cnn · 12\\-02 00\\:51`` in a picker, ``/root/\\.latency\\_lab`` in a path).
"""
from __future__ import annotations

_MARKDOWN_SPECIALS = set("\\`*_{}[]()#+-.!|<>~:$&")


def plain(text: object) -> str:
    """User text inside Markdown, shown as the characters it is: every Markdown, shortcode or
    LaTeX sign escaped, so a name like ``![p](http://host/x.png)`` makes no browser fetch
    anything."""
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIALS else ch for ch in str(text))


def option_text(text: object) -> str:
    """User text as an option of ``st.selectbox``/``st.multiselect`` (their ``format_func``):
    those show text as it is, so it is not escaped (escaping showed every backslash); one line,
    since an option is one."""
    return " ".join(str(text).split())


def code_span(text: object) -> str:
    """User text inside a Markdown code span (``f"`{code_span(path)}`"``): a code span shows its
    text as it is — a backslash there is a backslash — so nothing is escaped; only a backtick,
    which would end the span, becomes a quote, and a line break a space."""
    return " ".join(str(text).replace("`", "'").splitlines())


__all__ = ["code_span", "option_text", "plain"]
