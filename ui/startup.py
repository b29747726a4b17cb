"""Pipelines and servers named when the dashboard server starts: only whoever starts the
server names pipelines and targets; a browser never sends code, model files or a URL to send
load to (a shared dashboard would otherwise be a load generator anyone could aim)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

#: the servers of yours the dashboard offers: "NAME=URL,NAME=URL" (inherited by the pages)
TARGETS_ENV = "LATENCY_LAB_TARGETS"
#: what a target's name may be (it is shown, and keys widgets)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def startup_pipelines(argv: list[str] | None = None) -> list[str]:
    """``streamlit run app.py -- --pipeline file.py:Name [--pipeline mod:Name]``: add those
    specs to ``$LATENCY_LAB_PIPELINES`` (inherited by every run process), so the shared
    dashboard offers them by name. A browser never sends code or model files; only whoever
    starts the server names pipelines. Returns the specs added."""
    from latency.pipelines.registry import STARTUP_ENV

    return _named_at_start("--pipeline", STARTUP_ENV, argv)


def _named_at_start(flag: str, env: str, argv: list[str] | None) -> list[str]:
    """Each ``flag VALUE`` (or ``flag=VALUE``) of the script's arguments (``argv``: instead
    of ``sys.argv[1:]``), added to the comma-separated ``$env`` unless there already;
    returns those added."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    given = [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]
    given += [a.split("=", 1)[1] for a in args if a.startswith(f"{flag}=")]
    have = [s for s in os.environ.get(env, "").split(",") if s.strip()]
    new = [s for s in given if s not in have]
    if new:
        os.environ[env] = ",".join(have + new)
    return new


@dataclass(frozen=True)
class NamedTargets:
    """The servers named at start, by name (their OpenAI-compatible base URL), and one line
    per malformed entry."""

    urls: dict[str, str]
    errors: list[str]


def startup_targets(argv: list[str] | None = None) -> list[str]:
    """``streamlit run app.py -- --target NAME=URL [--target NAME=URL]``: add them to
    ``$LATENCY_LAB_TARGETS`` (which may name some already). Returns the entries added."""
    return _named_at_start("--target", TARGETS_ENV, argv)


def named_targets(text: str | None = None) -> NamedTargets:
    """The servers ``$LATENCY_LAB_TARGETS`` names (``text``: that value), each an http(s)
    URL of an OpenAI-compatible server (its ``/v1``); a malformed entry is one error line and
    is not offered."""
    raw = os.environ.get(TARGETS_ENV, "") if text is None else text
    urls: dict[str, str] = {}
    errors: list[str] = []
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        name, _, url = entry.partition("=")
        name, url = name.strip(), url.strip()
        parts = urlsplit(url)
        if not NAME.match(name):
            errors.append(f"{TARGETS_ENV}: {entry!r} is not NAME=URL (a NAME of letters, "
                          "digits, '.', '_' or '-')")
        elif parts.scheme not in ("http", "https") or not parts.hostname:
            errors.append(f"{TARGETS_ENV}: {name}'s URL must be http:// or https:// with a "
                          f"host (got {url!r})")
        elif name in urls:
            errors.append(f"{TARGETS_ENV}: {name} is named twice")
        else:
            urls[name] = url.rstrip("/")
    return NamedTargets(urls, errors)


__all__ = ["NamedTargets", "TARGETS_ENV", "named_targets", "startup_pipelines",
           "startup_targets"]
