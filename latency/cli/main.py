"""``python -m latency`` (console script ``latency``): the command line's entry point.

Each sub-command lives in its own module (``run``, ``simulate``, ``serve``, ``ab``, ``history``
for ``history`` and ``compare``, ``pipelines`` for ``models``, ``new-pipeline`` and
``export``); they import the engine only when they run, so ``--help`` and ``models`` stay fast
and Ctrl-C at any moment ends with one line. The flags of RunConfig's settings are not declared
here but on its fields (``latency.cli.config_flags``); ``docs/cli.md`` is written from this
parser (``latency.cli.reference``).
Bad input never shows a traceback: one line on stderr and exit code 2, before anything runs.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from latency.cli import ab as ab_cli
from latency.cli import history as history_cli
from latency.cli import pipelines as pipelines_cli
from latency.cli import run as run_cli
from latency.cli import serve as serve_cli
from latency.cli import simulate as simulate_cli
from latency.cli import sweep as sweep_cli
from latency.cli.args import EXIT_OK, EXIT_USAGE, FORMATTER, Parser, UsageError
from latency.core.errors import ConfigError, PipelineError

__all__ = ["EXIT_OK", "EXIT_USAGE", "UsageError", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m latency", formatter_class=FORMATTER,
               description="Latency Lab: where does the time of one prediction request go?")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    pipelines_cli.add_parsers(sub, FORMATTER)
    serve_cli.add_parser(sub, FORMATTER)
    run_cli.add_parser(sub)
    simulate_cli.add_parser(sub)
    sweep_cli.add_parser(sub)
    ab_cli.add_parser(sub, FORMATTER)
    history_cli.add_parsers(sub, FORMATTER)
    return p


def cmd_models(a: argparse.Namespace) -> int:
    """``models``: one line per pipeline, as the README shows it — its name, what it is, where
    it comes from (an entry point, ``--pipeline``) and the ``--model-arg`` flags it takes with
    their defaults, ready to paste (their help was a line each, and ``synthetic`` and
    ``model-file`` filled a screen)."""
    import shlex

    from latency.pipelines.registry import load_spec, sources

    listed = sources()
    for spec in a.pipeline:
        named = load_spec(spec)  # a bad spec: one line, exit 2
        listed.append((named.name, named, None))
    width = max(len(name) for name, _, _ in listed)
    for name, src, why in listed:
        if src is None:
            print(f"{name:<{width}}  cannot load: {why}")
            continue
        line = f"{name:<{width}}  {' '.join(src.description.split())}"
        cls = src.cls
        if cls is not None and getattr(cls, "generative", False):
            line += "  [generative: --output-tokens, docs/generation.md]"
        if src.origin not in ("sample", "model file"):
            line += f"  [{src.origin}]"
        if src.model_args:
            line += " · " + " ".join(f"--model-arg {shlex.quote(f'{arg.name}={arg.default}')}"
                                     for arg in src.model_args)
        print(line)
    return EXIT_OK


COMMANDS = {
    "models": cmd_models,
    "new-pipeline": pipelines_cli.cmd_new_pipeline,
    "export": pipelines_cli.cmd_export,
    "run": run_cli.cmd_run,
    "simulate": simulate_cli.cmd_simulate,
    "sweep": sweep_cli.cmd_sweep,
    "serve": serve_cli.cmd_serve,
    "ab": ab_cli.cmd_ab,
    "history": history_cli.cmd_history,
    "compare": history_cli.cmd_compare,
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except (UsageError, ConfigError, PipelineError) as exc:
        print(f"latency: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("latency: aborted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `latency models | head`: the reader left; so do we, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
