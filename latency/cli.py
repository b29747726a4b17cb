"""``python -m latency``: list pipelines, run a profile, print the summary, write JSON/CSV.

Bad input never shows a traceback: one line on stderr and exit code 2, before anything runs.
A run that fails midway exits 1 but still prints and writes what it measured.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Any, Sequence

from latency import cli_history as history_cli

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Raised instead of argparse's exit, so every bad input looks the same: one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _positive_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m latency", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                description="Latency Lab: where does the time of one prediction request go?")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p_fmt = argparse.ArgumentDefaultsHelpFormatter
    sub.add_parser("models", help="list the sample pipelines")
    from latency.cli_transport import add_serve_parser, add_server_flags

    add_serve_parser(sub, p_fmt)

    r = sub.add_parser("run", help="profile a pipeline under load", formatter_class=p_fmt)
    add_server_flags(r)
    load = r.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=int,
                      help="closed loop: number of clients (1 when --rate is not given)")
    load.add_argument("--rate", type=_positive_float, help="open loop: requests per second")
    r.add_argument("--arrival", help="open-loop arrivals: poisson (default) or constant")
    length = r.add_mutually_exclusive_group()
    length.add_argument("--requests", type=int, help="measured requests (default 1000)")
    length.add_argument("--duration", type=_positive_float, help="measured seconds")
    r.add_argument("--warmup", type=int, default=20, help="warm-up requests, not in statistics")
    r.add_argument("--seed", type=int, default=0, help="seed of arrivals and inputs")
    from latency import cli_transport

    cli_transport.add_run_flags(r)
    r.add_argument("--optimize", default="", metavar="LEVERS",
                   help="comma-separated levers: int8, compile, channels_last, bf16, "
                        "prune_unstructured, prune_structured")
    r.add_argument("--pre", default="fast", help="preprocessing variant: fast or naive")
    r.add_argument("--post", default="fast", help="postprocessing variant: fast or naive")
    r.add_argument("--json", metavar="PATH", help="write the full result as JSON")
    r.add_argument("--csv", metavar="PATH", help="write one row per request as CSV")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    r.add_argument("--name", help="name the run in the history")
    r.add_argument("--no-save", action="store_true", help="do not save the run in the history")
    history_cli.add_db_flag(r)

    sm = sub.add_parser("simulate", help="simulate the serving system (no model runs)",
                        formatter_class=p_fmt)
    sm.add_argument("--rate", type=_positive_float,
                    help="arrivals per second (required, except with --from-run: the run's)")
    sm.add_argument("--replicas", type=int, default=1, help="model workers")
    sm.add_argument("--batch-size", type=int, default=1, help="largest batch")
    sm.add_argument("--max-batch-delay-ms", type=_positive_float, default=0.0,
                    help="longest wait for a batch to fill")
    sm.add_argument("--arrival", default="poisson",
                    help="poisson, constant, bursty (on/off at twice the rate) or recorded "
                         "(the --from-run run's own arrival times)")
    sm.add_argument("--service-ms", type=_positive_float, default=5.0,
                    help="mean forward time per batch (ms)")
    sm.add_argument("--service-dist", default="exponential",
                    help="constant, exponential or lognormal")
    sm.add_argument("--service-cv", type=_positive_float, default=1.0,
                    help="lognormal spread (coefficient of variation)")
    sm.add_argument("--from-run", metavar="RUN",
                    help="resample service times (every component; forward per batch size) "
                         "from a recorded run: the JSON or CSV `run --json/--csv` wrote, or a "
                         "history run id")
    sm.add_argument("--preprocess-workers", type=int,
                    help="preprocess worker pool (requests wait for a free worker); default: "
                         "the --from-run run's, else unlimited")
    history_cli.add_db_flag(sm)
    sm.add_argument("--requests", type=int, default=100_000, help="simulated requests")
    sm.add_argument("--seed", type=int, default=0, help="seed of arrivals and service draws")
    sm.add_argument("--json", metavar="PATH", help="write the summary as JSON")
    from latency.ab_cli import add_parser as add_ab_parser

    add_ab_parser(sub, p_fmt)
    history_cli.add_parsers(sub, p_fmt)
    return p


def _config_from_args(a: argparse.Namespace) -> Any:
    from latency.config import RunConfig

    return RunConfig(model=a.model, model_args=list(a.model_arg), device=a.device,  # type: ignore[arg-type]
                     dtype=a.dtype, batch_size=a.batch_size,
                     max_batch_delay_ms=a.max_batch_delay_ms, replicas=a.replicas,
                     threads=a.threads, preprocess_workers=a.preprocess_workers,
                     concurrency=a.concurrency, rate=a.rate, arrival=a.arrival or "poisson",
                     requests=a.requests, duration_s=a.duration, warmup=a.warmup, seed=a.seed,
                     optimize=a.optimize, pre=a.pre, post=a.post,
                     **_transport_kwargs(a))


def _transport_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    from latency.cli_transport import config_kwargs

    return config_kwargs(a)


def _cmd_models() -> int:
    from latency.registry import list_pipelines

    infos = list_pipelines()
    width = max(len(i.name) for i in infos)
    for info in infos:
        print(f"{info.name:<{width}}  {info.description}")
        for arg in info.model_args:
            print(f"{'':<{width}}    --model-arg {arg.name}={arg.default}  ({arg.help})")
    return EXIT_OK


def _cmd_run(a: argparse.Namespace) -> int:
    from latency.config import ConfigError
    from latency.engine import execute
    from latency.summary import format_summary

    if a.arrival is not None and a.rate is None:
        raise ConfigError("--arrival applies to open loop only: give --rate too")
    config = _config_from_args(a).validated()  # ConfigError → one line, exit 2
    store = None
    if not a.no_save:
        from latency.store import RunStore

        store = RunStore(a.db)
        store.check_writable()  # a bad --db fails here, before anything runs
    for path in (a.json, a.csv):
        if path:
            try:
                open(path, "a").close()
            except OSError as exc:
                raise ConfigError(f"cannot write {path}: {exc.strerror}") from None
    cancel = threading.Event()

    def on_sigint(signum: int, frame: Any) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        print("\nstopping: letting in-flight requests finish (Ctrl-C again to abort)",
              file=sys.stderr)
        cancel.set()

    signal.signal(signal.SIGINT, on_sigint)
    last = [0.0]

    def on_rows(rows: Any, errors: Any, progress: dict[str, Any]) -> None:
        if a.quiet or time.monotonic() - last[0] < 1.0:
            return
        last[0] = time.monotonic()
        measured = max(progress["done"] - config.warmup, 0)
        of = f"/{config.requests}" if config.requests else ""
        print(f"[{progress['phase']}] {measured}{of} measured requests, "
              f"{progress['elapsed_s']:.1f} s", file=sys.stderr)

    result = execute(config, cancel=cancel, on_rows=on_rows)
    print(format_summary(result))
    from latency.optimize import report_lines

    for line in report_lines(result.environment):
        print(line)
    if a.json:
        result.to_json(a.json)
    if a.csv:
        result.to_csv(a.csv)
    if store is not None:
        try:
            run_id = store.save(result, name=a.name, source="cli")
        except Exception as exc:  # noqa: BLE001 - the result is printed and written; say so
            print(f"latency: warning: the run was not saved to the history {store.path}: "
                  f"{exc}", file=sys.stderr)
            return EXIT_FAILED
        print(f"saved as run {run_id} (python -m latency history show {run_id})")
    return EXIT_FAILED if result.status == "failed" else EXIT_OK


def _cmd_simulate(a: argparse.Namespace) -> int:
    import json

    from latency import queueing
    from latency.config import MAX_BATCH, MAX_REQUESTS, ConfigError, positive_int
    from latency.simulate import ARRIVALS, DISTS, ServiceModel, SimConfig, summarize_simulation
    from latency.summary import format_table

    positive_int("replicas", a.replicas, 1024)
    positive_int("batch-size", a.batch_size, MAX_BATCH)
    positive_int("requests", a.requests, MAX_REQUESTS)
    if a.preprocess_workers is not None:
        positive_int("preprocess-workers", a.preprocess_workers, 1024)
    if a.arrival not in ARRIVALS:
        raise ConfigError(f"--arrival must be one of: {', '.join(ARRIVALS)}")
    if a.service_dist not in DISTS:
        raise ConfigError(f"--service-dist must be one of: {', '.join(DISTS)}")
    if a.rate is not None and not 0 < a.rate <= 1e6:
        raise ConfigError(f"--rate must be > 0 and <= 1000000 requests/s (got {a.rate:g})")
    for flag, value in (("service-ms", a.service_ms), ("service-cv", a.service_cv)):
        if not 0 < value < 1e7:
            raise ConfigError(f"--{flag} must be > 0 (got {value:g})")
    if not 0 <= a.max_batch_delay_ms <= 1e5:
        raise ConfigError("--max-batch-delay-ms must be between 0 and 100000")
    if a.from_run is None and (a.rate is None or a.arrival == "recorded"):
        raise UsageError("--rate is required (or --from-run RUN to take a recorded run's)"
                         if a.rate is None else "--arrival recorded needs --from-run RUN")
    times = None
    if a.from_run is not None:
        from latency.calibration import recorded_arrivals
        from latency.records_io import load_run

        try:
            rows, recorded_config = load_run(a.from_run, a.db)
            svc = ServiceModel.from_rows(rows)
            times, recorded_rate = recorded_arrivals(rows)
        except ValueError as exc:
            raise ConfigError(f"--from-run: {exc}") from None
        if a.rate is None or a.arrival == "recorded":
            a.rate = recorded_rate
        if a.preprocess_workers is None:
            a.preprocess_workers = recorded_config.get("preprocess_workers")
        source = (f"service resampled from {a.from_run} "
                  f"({len(rows)} recorded requests, batch sizes "
                  f"{', '.join(str(b) for b in sorted(svc.forward_by_batch))})")
    else:
        svc = ServiceModel(forward_ms=a.service_ms, dist=a.service_dist, cv=a.service_cv)
        source = f"service {a.service_ms:g} ms {a.service_dist}"
    cfg = SimConfig(rate=a.rate, replicas=a.replicas, batch_size=a.batch_size,
                    max_batch_delay_ms=a.max_batch_delay_ms, arrival=a.arrival,
                    requests=a.requests, seed=a.seed, arrival_times_ms=times,
                    preprocess_workers=a.preprocess_workers)
    s = summarize_simulation(cfg, svc)
    cv = {"constant": 0.0, "exponential": 1.0}.get(a.service_dist, a.service_cv)
    theory = None
    if (a.from_run is None and a.batch_size == 1 and a.arrival == "poisson"
            and s["utilisation"] < 1):
        rate_per_ms, tau = a.rate / 1000, a.service_ms
        theory = (queueing.mmc(rate_per_ms, tau, a.replicas) if cv == 1.0 else
                  queueing.mg1(rate_per_ms, tau, cv) if a.replicas == 1 else
                  queueing.allen_cunneen(rate_per_ms, tau, a.replicas, 1.0, cv))
    s["closed_form"] = None if theory is None else {
        "model": theory.model, "wait_mean_ms": theory.wait_mean,
        "response_mean_ms": theory.response_mean}
    print(f"SIMULATED (no model ran): {a.rate:g} req/s {a.arrival}, {a.replicas} replica(s), "
          f"batch ≤ {a.batch_size} / {a.max_batch_delay_ms:g} ms, "
          f"{a.preprocess_workers or 'unlimited'} preprocess worker(s), {source}; "
          f"utilisation {s['utilisation']:.2f}")
    print(f"requests {s['requests']} (after a {s['warmup_requests']}-request transient), "
          f"throughput {s['throughput_rps']:.1f} req/s\n")
    print(format_table(s))
    if theory is not None:
        print(f"\nclosed form {theory.model}: mean wait {theory.wait_mean:.3f} ms, mean "
              f"response {theory.response_mean:.3f} ms (simulated: "
              f"{s['components_ms']['queue']['mean']:.3f} / {s['latency_ms']['mean']:.3f})")
    growth = s.get("queue_growth")
    if growth:
        print("\nqueue length over the simulated horizon (unstable: it only grows):")
        print("  " + "  ".join(f"{t:.1f}s:{q}" for t, q in growth))
    for w in s["warnings"]:
        print(f"warning: {w}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"simulated": True, "config": vars(a), "summary": s}, f, indent=2)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    from latency.config import ConfigError
    from latency.pipeline import PipelineError

    try:
        args = build_parser().parse_args(argv)
        if args.command == "models":
            return _cmd_models()
        if args.command == "history":
            return history_cli.cmd_history(args)
        if args.command == "compare":
            return history_cli.cmd_compare(args)
        if args.command == "serve":
            from latency.cli_transport import cmd_serve

            return cmd_serve(args)
        if args.command == "simulate":
            return _cmd_simulate(args)
        if args.command == "ab":
            from latency.ab_cli import cmd_ab

            return cmd_ab(args)
        return _cmd_run(args)
    except (UsageError, ConfigError, PipelineError) as exc:
        print(f"latency: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("latency: aborted", file=sys.stderr)
        return 130
