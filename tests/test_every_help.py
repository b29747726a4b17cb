"""Every command's and sub-command's ``--help`` prints (a help text argparse cannot format —
a ``%(default)`` on a flag whose default is SUPPRESS — was a traceback for each of
``history show/rename/delete/export --help``)."""
from __future__ import annotations

import argparse

import pytest

from latency.cli.main import build_parser, main


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
              ) -> list[tuple[str, ...]]:
    out = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _commands(sub, (*prefix, name))
    return out


COMMANDS = [c for c in _commands(build_parser()) if c]


def test_the_walk_finds_the_nested_commands():
    assert ("history", "export") in COMMANDS and ("run",) in COMMANDS


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_prints(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    assert "usage:" in capsys.readouterr().out
