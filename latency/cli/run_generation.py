"""``python -m latency run`` of a generative pipeline: streamed requests, token by token.

Reached from ``run`` when the pipeline is generative (``synthetic-lm``, ``tiny-lm``, your own
``GenerativePipeline``) or a generation flag is given. Bad input is one line and exit 2
before anything runs; a run that fails midway exits 1 with what it measured printed and
written; INVALID exits 1 (DISTURBED too under ``--require-quiet``); a signal stops the run
with what it measured and exits 128 + the signal.

The run executes in a run process of its own (``latency.execution.gen_process``), as a
one-shot run does: a pipeline that crashes takes that process, and the CLI reports a failed
run. A ``--pipeline`` of yours is imported only there; a config it refuses is still one line
and exit 2.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

from latency.cli.args import EXIT_FAILED, EXIT_OK, stop_on_signals
from latency.core.config import RunConfig
from latency.core.errors import ConfigError


def cmd_run_generation(a: argparse.Namespace, config: RunConfig) -> int:
    from latency.execution.gen_process import run_generation_process
    from latency.execution.validate import validated
    from latency.storage.outputs import check_output
    from latency.storage.store import default_path

    # ConfigError → one line, exit 2; a pipeline of yours is imported in the run process only
    config = validated(config, generation=True, user_code=config.pipeline is None)
    store = None
    if not a.no_save:
        from latency.storage.gen_store import GenerationStore
        from latency.storage.store import checked_name

        store = GenerationStore(a.db)
        store.check_writable()  # a bad --db fails here, before anything runs
        if a.name is not None:
            checked_name(a.name)
    outputs = [(flag, path) for flag, path in (("--json", a.json), ("--csv", a.csv),
                                               ("--parquet", getattr(a, "parquet", None)),
                                               ("--trace", getattr(a, "trace", None)))
               if path]
    history = a.db or default_path()
    for flag, path in outputs:  # before anything runs; creates nothing
        check_output(path, flag, force=a.force, history=history,
                     inputs=(config.prompts, (config.model_args or {}).get("file")))
    resolved = [Path(p).expanduser().resolve() for _, p in outputs]
    if len(set(resolved)) != len(resolved):
        raise ConfigError("--json, --csv, --parquet and --trace must name different files")
    cancel = threading.Event()
    stopped_by = stop_on_signals(cancel)
    last = [0.0]
    told = [False]

    def report(progress: dict[str, Any]) -> None:
        if progress.get("phase") == "waiting" and "waiting_for" in progress:
            if not told[0]:
                told[0] = True
                print(f"waiting for the machine: {progress['waiting_for']} is measuring",
                      file=sys.stderr)
            return
        if a.quiet or time.monotonic() - last[0] < 1.0 or progress.get("phase") not in (
                "warmup", "measuring"):
            return
        last[0] = time.monotonic()
        done = max(int(progress.get("done", 0)) - (config.warmup
                                                  if progress["phase"] == "measuring" else 0),
                   0)
        of = f"/{config.requests}" if config.requests and progress["phase"] == "measuring" \
            else ""
        print(f"[{progress['phase']}] {done}{of} requests, "
              f"{progress.get('elapsed_s', 0.0):.1f} s", file=sys.stderr)

    result = run_generation_process(config, cancel=cancel, on_progress=report,
                                    force=a.no_wait, who="CLI run",
                                    history=str(store.path) if store is not None else None,
                                    name=a.name, source="cli")
    print(repr(result))
    code = EXIT_FAILED if result.status == "failed" or not result.validity.valid else EXIT_OK
    if "signal" in stopped_by:
        code = 128 + stopped_by["signal"]
    from latency.cli.finish import save_and_write

    def data_of(flag: str) -> bytes | str:
        if flag == "--parquet":
            import io

            buf = io.BytesIO()
            result.tokens_frame().to_parquet(buf, index=False)
            return buf.getvalue()
        if flag == "--trace":
            from latency.core.records import in_process
            from latency.storage.gen_trace import gen_trace_bytes

            return gen_trace_bytes(result.rows, result.tokens, result.steps, result.errors,
                                   {"model": config.model}, in_process(config))
        return result.json_text() if flag == "--json" else result.csv_bytes()

    return save_and_write(result, store, a.name, "generation", outputs, data_of, code)
