"""How a configuration field is offered to people: its flag, help, choices, the commands that
take it — as plain data in the field's ``metadata``.

One place, so the command line (``latency.cli.config_flags`` turns these into argparse calls),
the dashboard's tooltips and the CLI reference (``docs/cli.md``) cannot drift apart: a
setting's meaning is written once, next to its default. Nothing here knows argparse or
Streamlit, so ``core`` stays importable by everything.

    batch_size: int = field(default=1, metadata=flag(
        "--batch-size", "largest batch a replica runs", commands=SERVER, group=SERVING))
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

#: the key of a field's metadata that holds its ``Flag``
FLAG = "flag"
#: how the value is read from the command line
TYPES = ("str", "int", "float", "pairs", "list")


@dataclass(frozen=True)
class Flag:
    """One setting as people see it.

    ``type``: ``str``, ``int``, ``float`` (any number), ``pairs`` (a repeatable ``KEY=VALUE``)
    or ``list`` (comma-separated). ``commands``: the sub-commands that take it as a flag (none:
    an API and dashboard setting only). ``exclusive``: flags sharing this name exclude each
    other. ``unset``: the command reads "not given" as None, to tell it from the default (the
    help then says the default in ``default_text``). ``defaults``: a command whose own default
    differs, and why it may: the value for that command (``ab``'s blocks are short runs).
    """

    name: str
    help: str
    commands: tuple[str, ...] = ()
    group: str = ""
    type: str = "str"
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    exclusive: str | None = None
    unset: bool = False
    default_text: str | None = None
    defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"{self.name}: type must be one of {TYPES}, not {self.type!r}")
        if not self.name.startswith("--"):
            raise ValueError(f"a flag's name starts with --, not {self.name!r}")


def flag(name: str, help: str, **kw: Any) -> dict[str, Flag]:
    """A field's ``metadata`` holding its ``Flag`` (``field(default=..., metadata=flag(...))``)."""
    if "defaults" in kw:
        kw["defaults"] = MappingProxyType(dict(kw["defaults"]))
    return {FLAG: Flag(name, help, **kw)}


def flags_of(cls: Any) -> dict[str, Flag]:
    """Every field of dataclass ``cls`` that has a ``Flag``, by field name, in field order."""
    return {f.name: f.metadata[FLAG] for f in dataclasses.fields(cls) if FLAG in f.metadata}


def default_of(cls: Any, name: str, command: str | None = None) -> Any:
    """Field ``name``'s default for ``command``: the command's own one if its ``Flag`` has
    one, else the dataclass's (a fresh value for a ``default_factory``)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    meta = f.metadata.get(FLAG)
    if meta is not None and command in meta.defaults:
        return meta.defaults[command]
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default
