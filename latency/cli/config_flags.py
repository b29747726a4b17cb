"""RunConfig's fields as argparse flags, made from their metadata (``latency.core.flags``).

A sub-command does not declare the flags of the settings it shares with others: it asks for
the fields whose ``Flag`` names it (``add_config_flags(parser, "run")``) and reads them back
(``config_values(args, "run")``). So ``run``, ``ab``, ``serve`` and ``export`` cannot disagree
on a flag's name, type, default or help, and ``docs/cli.md`` (``latency.cli.reference``) shows
what they really parse. ``simulate`` is made the same way from the simulator's settings
(``SimConfig`` and the parametric ``ServiceModel``: ``classes=SIMULATED``).
"""
from __future__ import annotations

import argparse
from typing import Any

from latency.cli.args import NO_DEFAULT, number
from latency.core.config import GROUPS, RunConfig
from latency.core.flags import Flag, default_of, flags_of
from latency.simulation.config import GenSimSettings, SimConfig
from latency.simulation.service import ServiceModel

#: the dataclasses whose fields are ``simulate``'s flags
SIMULATED: tuple[type, ...] = (SimConfig, ServiceModel, GenSimSettings)

#: how each ``Flag.type`` is read from the command line (a one-line error when it cannot be)
_TYPES: dict[str, Any] = {"str": None, "int": int, "float": number}


def comma_list(text: str) -> list[str]:
    """argparse type: ``"int8,compile"`` → ``["int8", "compile"]`` (names checked later)."""
    return [item.strip() for item in text.split(",") if item.strip()]


def dest_of(f: Flag) -> str:
    """The attribute argparse stores a flag's value in (``--drain-grace`` → ``drain_grace``)."""
    return f.name[2:].replace("-", "_")


def fields_for(command: str, classes: tuple[type, ...] = (RunConfig,)
               ) -> dict[str, tuple[type, Flag]]:
    """The fields of ``classes`` (RunConfig's by default) that ``command`` takes as flags, by
    field name, in field order, each with the class that declares it."""
    return {name: (cls, f) for cls in classes for name, f in flags_of(cls).items()
            if command in f.commands}


def add_config_flags(p: argparse.ArgumentParser, command: str,
                     classes: tuple[type, ...] = (RunConfig,)
                     ) -> dict[str, argparse._ArgumentGroup]:
    """Add the flags of every field ``command`` takes, one help section per ``Flag.group``
    (in ``GROUPS`` order, then any other in field order); returns the sections, so a command
    can add its own flags to one."""
    taken = fields_for(command, classes)
    used = [f.group for _, f in taken.values()]
    order = [t for t in GROUPS if t in used] + list(dict.fromkeys(
        t for t in used if t not in GROUPS))
    groups = {title: p.add_argument_group(title) for title in order}
    exclusive: dict[str, Any] = {}
    for name, (cls, f) in taken.items():
        where: Any = groups[f.group]
        if f.exclusive is not None:
            if f.exclusive not in exclusive:
                exclusive[f.exclusive] = where.add_mutually_exclusive_group()
            where = exclusive[f.exclusive]
        where.add_argument(f.name, **_argparse_kwargs(cls, name, f, command))
    return groups


def _argparse_kwargs(cls: type, name: str, f: Flag, command: str) -> dict[str, Any]:
    """add_argument's keywords for one field of ``cls``: a default None ("not given") says
    its default in words, or nothing, rather than argparse's "(default: None)"."""
    default = None if f.unset else default_of(cls, name, command)
    text = f.help.replace("%", "%%")  # argparse formats help with %
    kw: dict[str, Any] = {"metavar": f.metavar, "choices": f.choices}
    if f.type == "pairs":
        kw.update(action="append", default=[])
        text += NO_DEFAULT
    elif f.type == "list":
        kw.update(type=comma_list, default=default)
        text += NO_DEFAULT
    else:
        kw.update(type=_TYPES[f.type], default=default)
        if default is None:
            text += (f" (default: {f.default_text})" if f.default_text else "") + NO_DEFAULT
    kw["help"] = text
    return {k: v for k, v in kw.items() if v is not None}


def config_values(a: argparse.Namespace, command: str) -> dict[str, Any]:
    """RunConfig keywords from ``command``'s parsed flags: each field's value, its default for
    ``command`` where an ``unset`` flag was not given."""
    out: dict[str, Any] = {}
    for name, (_, f) in fields_for(command).items():
        value = getattr(a, dest_of(f))
        out[name] = default_of(RunConfig, name, command) if value is None and f.unset \
            else value
    return out
