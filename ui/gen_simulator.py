"""The Load Simulator's generation mode: its settings (one frozen ``GenSimPage``) and its
computations, cached per setting and shared by every session. The work is in
``latency.simulation`` (a recorded generation replayed by ``gen_replay``, a parametric server by
``gen_parametric``, the curves by ``gen_capacity``), as for ``simulate --from-run``; this module
only chooses and caches it."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import streamlit as st

from latency.analysis.gen_result import GenResult
from latency.analysis.gen_view import GenView, view_of
from latency.analysis.validity import QUIET_MACHINE
from latency.core import fmt
from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.core.lengths import LengthSpec
from latency.core.slo import Slo
from latency.simulation.gen_capacity import (
    DEFAULT_ATTAINMENT,
    BestRate,
    GenCurve,
    GenPoint,
    best_rate,
    gen_sweep,
    point_of,
)
from latency.simulation.gen_parametric import ParametricCosts, parametric_setup
from latency.simulation.gen_replay import GenSimSetup, fitted_service, gen_replay
from latency.simulation.gen_service import GenService
from ui.gen_controls import OUTPUT_TOKENS, PROMPT_TOKENS, TPOT_TARGET_MS, TTFT_TARGET_MS

PARAMETRIC = "parametric"
HISTORY = "history:"  # source keys of generations read back from the saved history
#: a what-if's chunk when chunked prefill is off (Sarathi-Serve's budgets are a few hundred)
WHATIF_CHUNK = 256
#: a what-if's step budget when it turns chunked prefill off: the server's default
WHOLE_PROMPT_BUDGET = RunConfig.max_step_tokens


@dataclass(frozen=True)
class GenSimPage:
    """The sidebar as one value (the key of every cached computation). ``prompt_tokens`` and
    ``output_tokens`` are length specs; empty for a recorded source: the run's own lengths.
    ``clients`` set: a closed loop (``rate`` unused); ``chunked_prefill`` 0: off;
    ``kv_tokens`` 0: the default (every slot a whole context)."""

    source: str = PARAMETRIC
    costs: ParametricCosts | None = None
    prompt_tokens: str = PROMPT_TOKENS
    output_tokens: str = OUTPUT_TOKENS
    rate: float = 8.0
    clients: int | None = None
    arrival: str = "poisson"
    replicas: int = 1
    batching: str = RunConfig.batching
    max_running: int = RunConfig.max_running
    max_step_tokens: int = RunConfig.max_step_tokens
    chunked_prefill: int = 0
    kv_tokens: int = 0
    ttft_target_ms: float = TTFT_TARGET_MS
    tpot_target_ms: float = TPOT_TARGET_MS
    e2e_target_ms: float | None = None
    requests: int = 400
    decode_scale: float = 1.0

    @property
    def parametric(self) -> bool:
        return self.source == PARAMETRIC

    @property
    def objectives(self) -> str:
        return str(Slo(self.ttft_target_ms, self.tpot_target_ms, e2e_ms=self.e2e_target_ms))

    def run_settings(self) -> dict[str, Any]:
        """The scheduler and the objectives as RunConfig's fields (chunked prefill and the KV
        budget None when off; static batching prefills whole)."""
        return dict(max_running=self.max_running, max_step_tokens=self.max_step_tokens,
                    chunked_prefill=(self.chunked_prefill or None)
                    if self.batching != "static" else None,
                    kv_tokens=self.kv_tokens or None, batching=self.batching,
                    slo_ttft_ms=self.ttft_target_ms, slo_tpot_ms=self.tpot_target_ms,
                    slo_e2e_ms=self.e2e_target_ms)

    def curve_key(self) -> GenSimPage:
        """The setting less what a curve sweeps (its load): every rate shares one curve."""
        return replace(self, rate=1.0, clients=None)


def setup_of(p: GenSimPage) -> GenSimSetup:
    """The simulation of the page's setting (ConfigError, one line, for one it cannot run)."""
    scheduler = p.run_settings()
    load: dict[str, Any] = dict(rate=None if p.clients else p.rate, clients=p.clients,
                                replicas=p.replicas, requests=p.requests)
    if p.parametric:
        if p.costs is None:
            raise ConfigError("a parametric server needs its costs")
        costs = p.costs if p.decode_scale == 1.0 else replace(
            p.costs, step_ms=p.costs.step_ms * p.decode_scale,
            step_ms_per_seq=p.costs.step_ms_per_seq * p.decode_scale,
            step_ms_per_context_token=p.costs.step_ms_per_context_token * p.decode_scale)
        return parametric_setup(costs, prompt_tokens=p.prompt_tokens,
                                output_tokens=p.output_tokens, arrival=p.arrival,
                                **load, **scheduler)
    run, service = recorded(p.source)
    scheduler["chunked_prefill"] = scheduler["chunked_prefill"] or 0  # 0: off (None: recorded)
    return gen_replay(run, arrival=p.arrival, prompt_tokens=p.prompt_tokens or None,
                      output_tokens=p.output_tokens or None, decode_scale=p.decode_scale,
                      service=service, source=p.source[len(HISTORY):], **load, **scheduler)


@st.cache_resource(max_entries=8, show_spinner=False)
def recorded(source: str) -> tuple[GenResult, GenService]:
    """A saved generation and its fitted costs (fitted once for every session)."""
    from latency.storage.run_files import load_generation

    run = load_generation(source[len(HISTORY):])  # (ConfigError: one line)
    return run, fitted_service(run)


#: below this R² a step-cost fit is called poor where its predictions are shown
POOR_FIT_R2 = 0.9


def calibration_warnings(run: GenResult, service: GenService) -> list[str]:
    """What the predictions built on a saved run must say of it: that it was measured on a
    busy machine (its costs inflated with the machine's) and that its steps fit the cost
    model poorly — each a reason to read the figures as rough, and what to do instead."""
    out = []
    quiet = next((c for c in run.validity.checks if c.name == QUIET_MACHINE), None)
    if quiet is not None and not quiet.passed:
        out.append(f"Calibrated on a DISTURBED run ({run_label(run)}): {quiet.detail} — its "
                   "costs carry the busy machine's, so every prediction here is inflated. "
                   "Record the calibration run on a quiet machine, or **Validate** below: its "
                   "calibrated prediction then heads the page.")
    if service.step_r2 < POOR_FIT_R2:
        out.append(f"The step costs fit this run poorly (R² {service.step_r2:.2f}, a step "
                   f"predicted within {service.step_median_error:.0%} median): read the "
                   "figures as rough. **Validate** runs the setting for real and fits the "
                   "costs again on that run: its calibrated prediction then heads the page.")
    return out


def run_label(run: GenResult) -> str:
    return f"{run.config.model}, {run.summary.successful:,} requests"


#: the saved generations the source picker lists at once (the newest that match the search)
LISTED_RUNS = 30


def recorded_generations(find: str = "", keep: str | None = None) -> dict[str, str]:
    """The saved history's completed generations, {source key: label}: our own pipelines'
    (their steps fitted) and servers of yours (``--target``: fitted from outside) — the newest
    ``LISTED_RUNS`` whose id, name, model or load contain ``find``, searched over the whole
    history, and the run ``keep`` (the one chosen) whether it matches or not."""
    from latency.storage.store import RunStore, StoreError

    try:
        store = RunStore()
        runs = store.list(limit=LISTED_RUNS, status="completed", kind="generation",
                          text=find.strip() or None)
        if keep is not None and keep.startswith(HISTORY) \
                and all(r.id != keep[len(HISTORY):] for r in runs):
            runs.append(store.info(keep[len(HISTORY):]))
    except (StoreError, OSError):
        return {}
    return {f"{HISTORY}{r.id}": f"{r.id} · {r.name or r.model} · {r.load} (history"
            + (f", your server at {r.setup.split()[1]}: fitted from outside)"
               if r.setup.startswith("target ") else ")")
            for r in runs if r.n}


@dataclass(frozen=True)
class Headline:
    """The setting's own simulation and what the page draws of it."""

    result: GenResult
    view: GenView
    point: GenPoint
    describe: str
    fit: str


@st.cache_resource(max_entries=64, show_spinner=False)
def headline(p: GenSimPage) -> Headline:
    setup = setup_of(p)
    result = setup.run()
    return Headline(result, view_of(result), point_of(p.rate, result.summary),
                    setup.describe(), setup.about["fit"])


@st.cache_resource(max_entries=32, show_spinner=False)
def curve(p: GenSimPage) -> GenCurve:
    """The load curve of the setting (its rate swept: ``p.curve_key()``)."""
    return gen_sweep(setup_of(p))


@st.cache_resource(max_entries=32, show_spinner=False)
def best(p: GenSimPage, attainment: float = DEFAULT_ATTAINMENT) -> tuple[BestRate, GenCurve]:
    return best_rate(setup_of(p), curve(p), attainment)


def marked_curve(p: GenSimPage, attainment: float) -> tuple[BestRate, GenCurve]:
    """The curve with the bisection's points and, in open loop, the headline's own point
    marked on it (the marker lies on the line)."""
    answer, c = best(p.curve_key(), attainment)
    if p.clients is None:
        c = c.with_point(headline(p).point)
    return answer, c


def what_ifs(p: GenSimPage) -> dict[str, GenSimPage]:
    """The what-ifs the page sets beside the setting: name → the setting with one lever
    moved. Chunked prefill comes with a step budget of its chunk (and a token for each slot's
    decode): Sarathi-Serve's token budget, vLLM's ``max_num_batched_tokens`` — with the
    default budget, several prompts' chunks can still fill one long step."""
    out: dict[str, GenSimPage] = {}
    if p.batching != "static":  # static batching prefills whole
        if p.chunked_prefill:  # whole prompts need a step as long as the longest
            budget = max(p.max_step_tokens, WHOLE_PROMPT_BUDGET)
            out[f"chunked prefill off, step ≤ {budget:,} tokens"] = replace(
                p, chunked_prefill=0, max_step_tokens=budget)
        else:
            budget = WHATIF_CHUNK + p.max_running
            out[f"chunked prefill {WHATIF_CHUNK}, step ≤ {budget} tokens"] = replace(
                p, chunked_prefill=WHATIF_CHUNK, max_step_tokens=budget)
    out[f"twice the slots ({2 * p.max_running})"] = replace(p, max_running=2 * p.max_running)
    out["a 40 % faster decode step (× 0.6)"] = replace(p, decode_scale=p.decode_scale * 0.6)
    return out


def validation_config(p: GenSimPage, duration_s: float) -> RunConfig:
    """The real run that checks the page's prediction: synthetic-lm holding the parametric
    costs, or the saved run's own pipeline and settings, with the page's load, lengths,
    scheduler and targets either way. ConfigError (one line) for one the load generator
    cannot run (bursty arrivals are the simulator's only)."""
    if p.clients is None and p.arrival not in ("poisson", "constant"):
        raise ConfigError("a real run's arrivals are poisson or constant (bursty ones are "
                          "simulated only): choose one of those to validate")
    load: dict[str, Any] = ({"concurrency": p.clients, "rate": None} if p.clients else
                            {"rate": p.rate, "concurrency": None, "arrival": p.arrival})
    scheduler = {**p.run_settings(), "slo": None}  # the page's targets, not a preset
    if p.parametric:
        if p.costs is None:
            raise ConfigError("a parametric server needs its costs")
        return RunConfig(model="synthetic-lm", model_args=p.costs.model_args(),
                         prompt_tokens=LengthSpec.of(p.prompt_tokens, "--prompt-tokens"),
                         output_tokens=LengthSpec.of(p.output_tokens, "--output-tokens"),
                         replicas=p.replicas, duration_s=duration_s, **load, **scheduler)
    run, _ = recorded(p.source)
    rec = run.config
    if run.is_target:  # the same server again: it schedules itself, as it did
        if p.replicas != rec.replicas:
            raise ConfigError("a server of yours is validated as it is: its replicas are "
                              "its own (set them back to the run's to validate)")
        return replace(rec, prompt_tokens=p.prompt_tokens or rec.prompt_tokens,
                       output_tokens=p.output_tokens or rec.output_tokens,
                       duration_s=duration_s, requests=None, slo_ttft_ms=p.ttft_target_ms,
                       slo_tpot_ms=p.tpot_target_ms, slo_e2e_ms=p.e2e_target_ms, slo=None,
                       **load)
    return replace(rec, prompt_tokens=p.prompt_tokens or rec.prompt_tokens,
                   output_tokens=p.output_tokens or rec.output_tokens, replicas=p.replicas,
                   duration_s=duration_s, requests=None, target=None, **load, **scheduler)


@dataclass(frozen=True)
class GenValidation:
    """A validation run the page started: its id, the setting it checks and the prediction
    it is set beside (kept, so a moved slider does not re-label an earlier run)."""

    run_id: str
    page: GenSimPage
    predicted: GenPoint


@st.cache_resource(max_entries=16, show_spinner=False)
def calibrated_point(run_id: str) -> GenPoint:
    """The prediction again, knowing what this machine delivered: the validation run's own
    costs fitted from its steps, replaying its own arrivals and lengths (nothing of its
    queueing or its times)."""
    from ui.server import run_manager

    handle = run_manager().get(run_id)
    if handle is None:
        raise ConfigError(f"run {run_id} is no longer in memory")
    result = handle.result()
    setup = gen_replay(result, arrival="recorded", source=run_id)
    return point_of(result.config.rate or 1.0, setup.run().summary)


def calibrated_headline(page: GenSimPage) -> tuple[str, GenPoint] | None:
    """The calibrated prediction of this very setting, once a validation of it has finished
    (its run's id beside it): the figure to read first when the saved run's own calibration is
    in doubt — calibrated predictions came within ±13 % where a disturbed one was 2.8× off."""
    from ui.server import run_manager

    validation = st.session_state.get("gsimval_run")
    if not isinstance(validation, GenValidation) or validation.page != page:
        return None
    handle = run_manager().get(validation.run_id)
    if handle is None or not handle.done():
        return None
    snap = handle.snapshot()
    if snap.summary is None or not snap.summary.successful:
        return None
    try:
        return validation.run_id, calibrated_point(validation.run_id)
    except ConfigError:
        return None


#: the figures a validation compares: (GenPoint field, label)
VALIDATED = (("ttft_p50_ms", "TTFT p50"), ("ttft_p99_ms", "TTFT p99"),
             ("tpot_p50_ms", "TPOT p50"), ("tpot_p99_ms", "TPOT p99"))


def validation_rows(predicted: GenPoint, measured: GenPoint,
                    calibrated: GenPoint | None) -> list[dict[str, str]]:
    """Predicted (as set), predicted (calibrated), measured and the difference — against the
    calibrated prediction when there is one (the fair comparison)."""
    rows = []
    for key, label in VALIDATED:
        p, m = getattr(predicted, key), getattr(measured, key)
        c = getattr(calibrated, key) if calibrated is not None else None
        base = c if c else p
        row = {"": label, "predicted (as set)": fmt.duration(p)}
        if calibrated is not None:
            row["predicted (calibrated)"] = fmt.duration(c)
        row["measured"] = fmt.duration(m)
        row["difference"] = fmt.change(m / base - 1) if base else fmt.DASH
        rows.append(row)
    return rows
