"""docs/cli.md is the parser's own account of the command line: it fails here when a flag,
default or help changed and the file was not regenerated."""
import subprocess
import sys
from pathlib import Path

from latency.cli.reference import reference

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "cli.md"


def test_docs_cli_md_is_up_to_date_with_the_parser():
    assert DOC.read_text() == reference(), (
        "docs/cli.md is out of date: python -m latency.cli.reference > docs/cli.md")


def test_the_reference_lists_every_command_and_flag():
    from latency.cli.main import COMMANDS, build_parser

    text = reference()
    for command in COMMANDS:
        assert f"## `{command}`" in text, command
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    for action in run._actions:
        for option in action.option_strings:
            if option not in ("-h", "--help"):
                assert f"`{option}`" in text, option


def test_the_generator_writes_the_file_it_checks():
    out = subprocess.run([sys.executable, "-m", "latency.cli.reference"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == reference()
