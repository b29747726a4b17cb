"""``python -m latency run``: profile a pipeline under load, print the summary, write
JSON/CSV, save the run in the history.

Bad input never shows a traceback: one line on stderr and exit code 2, before anything runs.
A run that fails midway exits 1 but still prints and writes what it measured.

The run itself happens in a run process (``latency.execution.process``), as on the dashboard:
a pipeline that segfaults, aborts or calls ``os._exit`` takes that process, not this one, so
the CLI still reports a failed run (exit 1) with what was measured, saved and written — a CI
gate never reads a crash as a pass. Its module is imported there too, first; a config it
refuses is still one line and exit 2.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

from latency.cli import history as history_cli
from latency.cli import run_flags
from latency.cli.args import EXIT_FAILED, EXIT_OK, FORMATTER, stop_on_signals
from latency.cli.config_flags import config_values
from latency.core.config import RUN, RunConfig, field_help
from latency.core.errors import ConfigError


def add_parser(sub: Any) -> None:
    r = sub.add_parser("run", help="profile a pipeline under load", formatter_class=FORMATTER)
    run_flags.add_server_flags(r, RUN)
    r.add_argument("--require-quiet", action="store_true",
                   help=field_help("require_quiet").replace("%", "%%"))
    r.add_argument("--stop-on-eos", action="store_true",
                   help=field_help("stop_on_eos").replace("%", "%%"))
    r.add_argument("--scrape-metrics", action="store_true",
                   help=field_help("scrape_metrics").replace("%", "%%"))
    r.add_argument("--parquet", metavar="PATH",
                   help="generation: write every token's stamps as Parquet")
    r.add_argument("--trace", metavar="PATH",
                   help="generation: write a Perfetto/Chrome trace (a track per request with "
                        "its queue, prefill, decode and stall spans; the scheduler's steps)")
    r.add_argument("--json", metavar="PATH", help="write the full result as JSON")
    r.add_argument("--csv", metavar="PATH", help="write one row per request as CSV")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    r.add_argument("--name", help="name the run in the history")
    r.add_argument("--no-save", action="store_true", help="do not save the run in the history")
    history_cli.add_db_flag(r)
    r.add_argument("--force", action="store_true",
                   help="overwrite existing --json/--csv files (never the run history)")
    r.add_argument("--no-wait", action="store_true",
                   help="measure now even if another run holds this machine (both runs' "
                        "results then carry a warning that their timings were disturbed)")


def config_from_args(a: argparse.Namespace) -> RunConfig:
    """The RunConfig the flags describe (not yet validated)."""
    return RunConfig(**{**config_values(a, RUN), **run_flags.pipeline_kwargs(a),
                        **run_flags.config_kwargs(a),
                        "require_quiet": bool(getattr(a, "require_quiet", False)),
                        "stop_on_eos": bool(getattr(a, "stop_on_eos", False)),
                        "scrape_metrics": bool(getattr(a, "scrape_metrics", False))})


def cmd_run(a: argparse.Namespace) -> int:
    from latency.analysis.summary_text import format_summary, optimization_lines
    from latency.execution.process import RunOptions, run_watched
    from latency.execution.validate import validated

    if a.arrival is not None and a.rate is None:
        raise ConfigError("--arrival applies to open loop only: give --rate too")
    raw = config_from_args(a)
    from latency.pipelines.gen_checks import generative_run

    if generative_run(raw):
        from latency.cli.run_generation import cmd_run_generation

        return cmd_run_generation(a, raw)
    if getattr(a, "parquet", None) or getattr(a, "trace", None):
        raise ConfigError("--parquet and --trace write a generation's tokens and steps: this "
                          "pipeline is one-shot (its trace: python -m latency history export "
                          "ID --format trace)")
    # ConfigError → one line, exit 2; the pipeline's own code is checked in the run process
    config = validated(raw, user_code=False)
    store = None
    if not a.no_save:
        from latency.storage.store import RunStore, checked_name

        store = RunStore(a.db)
        store.check_writable()  # a bad --db fails here, before anything runs
        if a.name is not None:
            checked_name(a.name)  # StoreError: one line, exit 2
    from latency.storage.outputs import check_output
    from latency.storage.store import default_path

    history = store.path if store is not None else (a.db or default_path())
    outputs = [(flag, path) for flag, path in (("--json", a.json), ("--csv", a.csv)) if path]
    for flag, path in outputs:  # before anything runs; creates nothing
        check_output(path, flag, force=a.force, history=history,
                     inputs=(config.inputs, config.bodies,
                             (config.model_args or {}).get("file")))
    if a.json and a.csv and Path(a.json).expanduser().resolve() == \
            Path(a.csv).expanduser().resolve():
        raise ConfigError("--json and --csv name the same file")
    cancel = threading.Event()
    stopped_by = stop_on_signals(cancel)
    last = [0.0]
    told_waiting = [False]

    def report(progress: dict[str, Any]) -> None:
        if progress.get("phase") == "waiting" and "waiting_for" in progress:
            if not told_waiting[0]:  # said even with --quiet: the run is not hung
                told_waiting[0] = True
                print(f"waiting for the machine: {progress['waiting_for']} is measuring "
                      "(one run at a time keeps both runs' timings clean; --no-wait runs "
                      "now, and both results say they overlapped)", file=sys.stderr)
            return
        if a.quiet or time.monotonic() - last[0] < 1.0 or "done" not in progress \
                or progress.get("phase") in ("queued", "starting", "finishing", "done"):
            return
        last[0] = time.monotonic()
        measured = max(progress["done"] - config.warmup, 0)
        of = f"/{config.requests}" if config.requests else ""
        print(f"[{progress['phase']}] {measured}{of} measured requests, "
              f"{progress.get('elapsed_s', 0.0):.1f} s", file=sys.stderr)

    result = run_watched(config, cancel=cancel, on_progress=report, options=RunOptions(
        force=a.no_wait, who="CLI run", user_code_here=False,
        history=str(store.path) if store is not None else None, name=a.name, source="cli"))
    print(format_summary(result))
    for line in optimization_lines(result.environment):
        print(line)
    # INVALID exits 1; DISTURBED (a busy machine) does too under --require-quiet, which makes
    # the quiet machine check a required one (latency.analysis.validity)
    code = EXIT_FAILED if result.status == "failed" or not result.validity.valid else EXIT_OK
    if "signal" in stopped_by:
        code = 128 + stopped_by["signal"]  # stopped by the user or the system: not a success
    from latency.cli.finish import save_and_write

    return save_and_write(result, store, a.name, "run", outputs,
                          lambda flag: result.json_text() if flag == "--json"
                          else result.csv_bytes(), code)

