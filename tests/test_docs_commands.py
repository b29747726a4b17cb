"""Every `python -m latency …` command in the README's and the docs' code blocks is one the
tool takes: its flags parse, and a `run`'s settings pass the same checks the command makes
before it runs anything (the check that said "one line, exit 2" to a reader who copied
docs/generation.md's second example). A command that names a file of the reader's own
(`prompts.jsonl`, `my_lm.py`, a package of theirs, `/your/model`) or a server of theirs
(`--target http://…`) is parsed only: its settings can only be checked where that file or
server exists. A sketch (`run ... --backend ray`, its usual flags left as `...`) is not a
command and is left out; one needing an optional extra (Ray) needs it installed."""
from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from latency.cli.args import UsageError
from latency.cli.main import build_parser
from latency.cli.run import config_from_args
from latency.core.errors import ConfigError
from latency.execution.validate import validated
from latency.pipelines.gen_checks import generative_run
from tests.conftest import require_extra

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)
#: pages whose commands are the tool's own reference, generated from its parser
GENERATED = {"cli.md"}


def commands() -> list[tuple[str, str]]:
    """(page, command) for every command line in a fenced block: continuations joined, a
    trailing comment dropped."""
    out = []
    for page in PAGES:
        if page.name in GENERATED:
            continue
        for block in FENCE.findall(page.read_text()):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                line = line.strip()
                if line.startswith("python -m latency ") and " ..." not in line:
                    out.append((page.name, line.split("  #")[0].split(" # ")[0].strip()))
    return out


def readers_own(argv: list[str]) -> bool:
    """The command names a file that is not in the repository, or a server of the reader's."""
    for i, arg in enumerate(argv[1:], 1):
        if argv[i - 1] == "--target" or "/your/" in arg:
            return True
        if argv[i - 1] == "--pipeline":
            module = arg.split(":")[0]
            if not (ROOT / module).exists() and importlib.util.find_spec(
                    module.split(".")[0]) is None:
                return True  # a package of the reader's
        for value in (arg, arg.split(":")[0], arg.split("=", 1)[-1]):
            if re.search(r"\.(jsonl?|py|onnx|pt2?|csv)$|_dir$|^\./", value) \
                    and not (ROOT / value).exists():
                return True
    return False


COMMANDS = commands()


def test_the_docs_show_commands_of_every_kind():
    kinds = {shlex.split(c)[3] for _, c in COMMANDS}
    assert len(COMMANDS) >= 30 and {"run", "simulate", "compare", "history"} <= kinds, kinds


@pytest.mark.parametrize("page,command", COMMANDS, ids=[f"{p}:{c[18:60]}" for p, c in COMMANDS])
def test_a_documented_command_is_one_the_tool_takes(page, command, capsys):
    argv = shlex.split(command)[3:]
    try:
        args = build_parser().parse_args(argv)
    except (SystemExit, UsageError) as exc:
        pytest.fail(f"{page}: `{command}` does not parse: {exc} "
                    f"{capsys.readouterr().err.strip()}")
    if readers_own(argv):
        return
    if args.command == "sweep":  # its plan is checked as the command checks it
        from latency.cli.sweep import plan_from_args

        try:
            plan_from_args(args)
        except ConfigError as exc:
            pytest.fail(f"{page}: `{command}` would exit 2: {exc}")
        return
    if args.command != "run":
        return
    if getattr(args, "backend", None) == "ray":
        require_extra("ray", "a documented Ray Serve command is checked with Ray installed")
    raw = config_from_args(args)
    try:
        validated(raw, generation=generative_run(raw))
    except ConfigError as exc:
        pytest.fail(f"{page}: `{command}` would exit 2: {exc}")
