"""Simulating a recorded generation run, with what the caller changes: the one owner of what a
replay takes from a run, for ``simulate --from-run``, ``latency.simulate_generation`` and the
Load Simulator page alike.

From the run: its server's costs (``gen_service``, fitted over its steps), its load (a closed
loop's clients, or its rate with its arrival kind — a gamma run's own arrival times, which the
simulator's arrival kinds do not draw), its scheduler (slots, step budget, chunking, KV budget,
batching), its replicas, its requests' prompt and output lengths in the order it sent them,
and how many requests it measured. Each of these can be changed; "None" means as recorded.
The what-if levers scale the fitted calls: ``decode_scale=0.6`` is "a 40 % faster decode
step".
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from latency.analysis.gen_result import GenResult
from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.core.gen_records import STATUS_OK
from latency.core.lengths import LengthSpec
from latency.simulation.calibration import recorded_arrivals
from latency.simulation.config import SimConfig, finite_number
from latency.simulation.gen_service import GenService, fit_gen_service
from latency.simulation.gen_simulator import simulate_generation
from latency.simulation.gen_step_cost import FitError
from latency.simulation.gen_target_service import TargetFit, fit_target_service
from latency.simulation.setup import BOTH_LOADS

#: the recorded scheduler's settings a replay keeps unless told otherwise
SCHEDULER = ("max_running", "max_step_tokens", "chunked_prefill", "kv_tokens", "batching")
#: the most distinct lengths drawn for a workload (as a run's, ``gen_workload.MAX_WORK``)
MAX_DRAWS = 4096
#: what-if scales of the fitted calls: from 100× faster to 100× slower
SCALE_RANGE = (0.01, 100.0)


@dataclass(frozen=True)
class GenSimSetup:
    """What a generation simulation runs: the simulated run's config, its load, the fitted
    service, the lengths, and where they came from (in words and as values)."""

    config: RunConfig
    load: SimConfig
    service: GenService
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    about: dict[str, Any]

    def run(self) -> GenResult:
        """The simulated run; its warnings name any step beyond what the cost was fitted on."""
        from latency.analysis.findings import Finding

        result = simulate_generation(self.config, self.load, self.service, self.prompt_tokens,
                                     self.output_tokens, self.about)
        result.warnings.extend(Finding(f"simulated {why}", "run")
                               for why in self.service.extrapolations(result.steps))
        return result

    def describe(self) -> str:
        """The simulated system in one line (the CLI's header, the page's caption)."""
        c = self.config
        chunk = f"chunked prefill {c.chunked_prefill}" if c.chunked_prefill else "whole prefill"
        return (f"{self.load.describe().split(', ')[0]}, {c.batching} batching, "
                f"{c.max_running} slots, step ≤ {c.max_step_tokens:,} tokens, {chunk}, "
                f"{self.load.replicas} replica(s); {self.about['lengths']}")


def fitted_service(run: GenResult) -> GenService:
    """The recorded run's server costs (ConfigError, one line, when it cannot give them):
    fitted over its scheduler steps, or — a server of yours (``--target``), whose steps
    nobody recorded — from outside (``gen_target_service``)."""
    if run.is_target:
        return target_fit(run).service
    try:
        return fit_gen_service(run.rows, run.tokens, run.steps,
                               run.environment.get("max_context"))
    except FitError as exc:
        raise ConfigError(f"the recorded run cannot be simulated: {exc}") from None


def target_fit(run: GenResult) -> TargetFit:
    """A ``--target`` run's server fitted from outside (ConfigError, one line, when the run
    shows too little of it)."""
    try:
        return fit_target_service(run.rows, run.tokens, run.reports, run.environment)
    except FitError as exc:
        raise ConfigError(f"the recorded run cannot be simulated: {exc}") from None


def gen_replay(run: GenResult, *, rate: float | None = None, clients: int | None = None,
               arrival: str | None = None, replicas: int | None = None,
               requests: int | None = None, seed: int = 0,
               prompt_tokens: str | None = None, output_tokens: str | None = None,
               decode_scale: float | None = None, prefill_scale: float | None = None,
               service: GenService | None = None, source: str = "the given run",
               **scheduler: Any) -> GenSimSetup:
    """The simulation of ``run`` with the changes given (module docstring); ``scheduler``:
    any of ``SCHEDULER`` (``chunked_prefill=0`` turns chunking off), and ``slo``,
    ``slo_ttft_ms``, ``slo_tpot_ms``, ``slo_e2e_ms``. ``service``: costs fitted already (a
    page fits once).
    ConfigError, one line, for a setting the simulation cannot run."""
    unknown = sorted(set(scheduler) - {*SCHEDULER, "slo", "slo_ttft_ms", "slo_tpot_ms",
                                       "slo_e2e_ms"})
    if unknown:
        raise ConfigError(f"unknown generation setting(s): {', '.join(unknown)}")
    if rate is not None and clients is not None:
        raise ConfigError(BOTH_LOADS)
    decode_scale = 1.0 if decode_scale is None else decode_scale  # None: as fitted
    prefill_scale = 1.0 if prefill_scale is None else prefill_scale
    for name, value in (("decode-scale", decode_scale), ("prefill-scale", prefill_scale)):
        if not (finite_number(value) and SCALE_RANGE[0] <= value <= SCALE_RANGE[1]):
            raise ConfigError(f"--{name} must be from {SCALE_RANGE[0]:g} to "
                              f"{SCALE_RANGE[1]:g} (got {value!r})")
    outside = target_fit(run) if run.is_target else None
    fitted = service or (outside.service if outside else fitted_service(run))
    svc = fitted.scaled(decode=decode_scale, prefill=prefill_scale) \
        if (decode_scale, prefill_scale) != (1.0, 1.0) else fitted
    rec = run.config
    measured = run.rows[~run.rows["warmup"]]
    ok = measured[measured["status"] == STATUS_OK]
    if len(ok) < 2:
        raise ConfigError("the recorded run has fewer than 2 successful measured requests: "
                          "nothing to replay")
    changes = {k: v for k, v in scheduler.items() if v is not None}
    if changes.get("chunked_prefill") == 0:
        changes["chunked_prefill"] = None
    if changes.get("batching") == "static" and "chunked_prefill" not in changes:
        changes["chunked_prefill"] = None  # static batching prefills whole
    if "slo" in changes:  # a preset replaces the recorded targets, as on the command line
        changes.setdefault("slo_ttft_ms", None)
        changes.setdefault("slo_tpot_ms", None)
    if outside is not None:  # the server's own scheduling, as far as the client saw it
        changes.setdefault("max_running", outside.slots)
        rec = replace(rec, **{f: getattr(RunConfig(), f) for f in RunConfig.TARGET_FIELDS})
    config = replace(rec, target=None, **changes)
    config._check_generation()  # the run's own checks: a setting it refuses, this refuses
    load, how = _load(run, rec, rate, clients, arrival, replicas, requests, seed, len(measured))
    prompts, outputs, lengths = _lengths(ok, prompt_tokens, output_tokens, seed)
    about = {"from_run": source, "load": how, "lengths": lengths,
             "decode_scale": decode_scale, "prefill_scale": prefill_scale,
             "fit": outside.about if outside else fitted.describe()}
    if outside is not None:
        about["slots"] = (f"{config.max_running} slots (given)" if "max_running" in scheduler
                          and scheduler["max_running"] is not None
                          else f"{outside.slots} slots: {outside.slots_from}")
    return GenSimSetup(config, load, svc, prompts, outputs, about)


def _load(run: GenResult, rec: RunConfig, rate: float | None, clients: int | None,
          arrival: str | None, replicas: int | None, requests: int | None, seed: int,
          measured: int) -> tuple[SimConfig, str]:
    given: dict[str, Any] = {"seed": seed, "requests": requests or measured,
                             "replicas": replicas or rec.replicas}
    closed = bool(rec.concurrency) and not rec.rate
    if clients is None and rate is None and closed and arrival is None:
        given["clients"] = int(rec.concurrency or 1)
        given["rate"] = 1.0  # unused by a closed loop
        how = f"the run's {given['clients']} closed-loop client(s)"
    elif clients is not None:
        given["clients"], given["rate"] = clients, 1.0
        how = f"{clients} closed-loop client(s)"
    else:
        times, recorded_rate = recorded_arrivals(run.rows)
        own = rec.arrival if rec.arrival in ("poisson", "constant") else "recorded"
        given["arrival"] = arrival or (own if not closed else "poisson")
        given["rate"] = rate or rec.rate or recorded_rate
        if given["arrival"] == "recorded":
            given["rate"] = recorded_rate
            given["arrival_times_ms"] = times
        how = f"{given['arrival']} arrivals at {given['rate']:g}/s"
    return SimConfig(**given).checked(), how


def _lengths(ok: np.ndarray, prompt_spec: str | None, output_spec: str | None, seed: int
             ) -> tuple[np.ndarray, np.ndarray, str]:
    """Each request's prompt and output length: drawn from a spec given, else the recorded
    requests' own, in the order they were sent."""
    order = np.argsort(ok["t_intended"], kind="stable")
    rng = np.random.default_rng(seed)

    def lengths(spec: str | None, flag: str, column: str, what: str) -> tuple[np.ndarray, str]:
        if spec is not None:
            return LengthSpec.parse(spec, flag).draw(rng, MAX_DRAWS), f"{what}s {spec} tokens"
        return ok[column][order].astype(np.int64), f"the run's {what} lengths"

    prompts, said_prompts = lengths(prompt_spec, "--prompt-tokens", "prompt_tokens", "prompt")
    outputs, said_outputs = lengths(output_spec, "--output-tokens", "output_tokens", "output")
    words = [said_prompts, said_outputs]
    n = min(len(prompts), len(outputs))
    if len(prompts) != len(outputs):  # one recorded, one drawn: the recorded one cycles
        n = max(len(prompts), len(outputs))
        prompts = np.resize(prompts, n)
        outputs = np.resize(outputs, n)
    return prompts[:n], outputs[:n], ", ".join(words)
