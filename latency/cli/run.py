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
    add_measuring_flags(r)
    r.add_argument("--parquet", metavar="PATH",
                   help="generation: write every token's stamps as Parquet")
    r.add_argument("--trace", metavar="PATH",
                   help="generation: write a Perfetto/Chrome trace (a track per request with "
                        "its queue, prefill, decode and stall spans; the scheduler's steps)")
    r.add_argument("--json", metavar="PATH", help="write the full result as JSON")
    r.add_argument("--csv", metavar="PATH", help="write one row per request as CSV")
    r.add_argument("--html", metavar="PATH",
                   help="write a report you can send: one self-contained HTML file (the "
                        "charts, the split, the verdict, the machine line, the settings; "
                        "opens offline)")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    r.add_argument("--name", help="name the run in the history")
    r.add_argument("--no-save", action="store_true", help="do not save the run in the history")
    history_cli.add_db_flag(r)
    r.add_argument("--force", action="store_true",
                   help="overwrite existing --json/--csv files (never the run history)")
    r.add_argument("--no-wait", action="store_true",
                   help="measure now even if another run holds this machine (both runs' "
                        "results then carry a warning that their timings were disturbed)")


#: the switches of a run (RunConfig's booleans), by flag
SWITCHES = (("--require-quiet", "require_quiet"), ("--stop-on-eos", "stop_on_eos"),
            ("--scrape-metrics", "scrape_metrics"), ("--reply-lengths", "reply_lengths"))


def add_measuring_flags(p: argparse.ArgumentParser) -> None:
    """What is served and how a run measures it: ``run``'s and ``sweep``'s."""
    run_flags.add_server_flags(p, RUN)
    for flag, name in SWITCHES:
        p.add_argument(flag, action="store_true", help=field_help(name).replace("%", "%%"))


def config_from_args(a: argparse.Namespace) -> RunConfig:
    """The RunConfig the flags describe (not yet validated)."""
    return RunConfig(**{**config_values(a, RUN), **run_flags.pipeline_kwargs(a),
                        **run_flags.config_kwargs(a),
                        **{name: bool(getattr(a, name, False)) for _, name in SWITCHES}})


def cmd_run(a: argparse.Namespace) -> int:
    """A run of either kind: its config checked, the history and the output files checked
    before anything runs; the run in a process of its own; then its text, saved, written."""
    from latency.analysis.summary_text import optimization_lines
    from latency.cli.finish import save_and_write
    from latency.execution.process import ProcessHandle, RunHandle, RunOptions, run_watched
    from latency.execution.validate import validated
    from latency.pipelines.gen_checks import generative_run
    from latency.storage.export import result_bytes
    from latency.storage.outputs import check_output
    from latency.storage.store import RunStore, checked_name, default_path

    if a.arrival is not None and a.rate is None:
        raise ConfigError("--arrival applies to open loop only: give --rate too")
    raw = config_from_args(a)
    generation = generative_run(raw)
    if not generation and (getattr(a, "parquet", None) or getattr(a, "trace", None)):
        raise ConfigError("--parquet and --trace write a generation's tokens and steps: this "
                          "pipeline is one-shot (its trace: python -m latency history export "
                          "ID --format trace)")
    # ConfigError → one line, exit 2; a pipeline's own code is imported in the run process
    config = (validated(raw, generation=True, user_code=raw.pipeline is None) if generation
              else validated(raw, user_code=False))
    store = None
    if not a.no_save:
        store = RunStore(a.db)
        store.check_writable()  # a bad --db fails here, before anything runs
        if a.name is not None:
            checked_name(a.name)  # StoreError: one line, exit 2
    history = store.path if store is not None else (a.db or default_path())
    outputs = [(flag, path) for flag, path in (
        ("--json", a.json), ("--csv", a.csv), ("--parquet", getattr(a, "parquet", None)),
        ("--trace", getattr(a, "trace", None)), ("--html", a.html)) if path]
    inputs = ((config.prompts,) if generation else (config.inputs, config.bodies))
    for flag, path in outputs:  # before anything runs; creates nothing
        check_output(path, flag, force=a.force, history=history,
                     inputs=(*inputs, (config.model_args or {}).get("file")))
    resolved = [Path(p).expanduser().resolve() for _, p in outputs]
    if len(set(resolved)) != len(resolved):
        raise ConfigError(f"{', '.join(f for f, _ in outputs)} must name different files")
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
                or progress.get("phase") not in ("warmup", "measuring", "draining"):
            return
        last[0] = time.monotonic()
        measured = max(progress["done"] - (config.warmup if progress["phase"] != "warmup"
                                           else 0), 0)
        of = f"/{config.requests}" if config.requests and progress["phase"] != "warmup" else ""
        print(f"[{progress['phase']}] {measured}{of} requests, "
              f"{progress.get('elapsed_s', 0.0):.1f} s", file=sys.stderr)

    options = RunOptions(force=a.no_wait, who="CLI run", user_code_here=False,
                         history=str(store.path) if store is not None else None,
                         name=a.name, source="cli")
    if generation:
        from latency.execution.gen_handle import GenRunHandle

        handle: ProcessHandle = GenRunHandle(config, options=options)
    else:
        handle = RunHandle(config, options=options)
    result = run_watched(handle, cancel=cancel, on_progress=report)
    text = [repr(result), *optimization_lines(result.environment)]
    if generation and result.is_target and result.summary.successful:
        text += _simulatable(result)
    print("\n".join(text))
    # INVALID exits 1; DISTURBED (a busy machine) does too under --require-quiet, which makes
    # the quiet machine check a required one (latency.analysis.validity)
    code = EXIT_FAILED if result.status == "failed" or not result.validity.valid else EXIT_OK
    if "signal" in stopped_by:
        code = 128 + stopped_by["signal"]  # stopped by the user or the system: not a success

    def data_of(flag: str, run_id: str | None) -> bytes:
        if flag == "--html":
            from latency.figures.report import report_html, run_report

            return report_html(run_report(result, "\n".join(text), run_id, a.name)).encode()
        return result_bytes(result, flag[2:])
    return save_and_write(result, store, a.name, outputs, data_of, code)


def _simulatable(result: Any) -> list[str]:
    """A line when ``simulate --from-run`` could not fit this target run's server (and what
    run would do), said where the run is read rather than when someone tries."""
    from latency.simulation.gen_step_cost import FitError
    from latency.simulation.gen_target_service import fit_target_service

    try:
        fit_target_service(result.rows, result.tokens, result.reports, result.environment)
    except FitError as exc:
        return [f"simulate: this run cannot be simulated (simulate --from-run): {exc}"]
    return []
