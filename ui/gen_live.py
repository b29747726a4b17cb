"""The Live Profiler for generation: a generative pipeline's run settings (``run_controls``),
and the live view of a generation run (``render``) — its TTFT and gap bars, histograms, the
waterfall of the last requests, the scheduler over time, refreshed every second from the run's
snapshot; at the end its verdict, validity, the text a few requests generated and the files.
The figures are ``latency.figures.gen_plots``'s, the same the Load Simulator draws."""
from __future__ import annotations

from typing import Any

import streamlit as st

from latency.analysis.gen_snapshot import GenSnapshot
from latency.core.config import RunConfig, field_help
from latency.core.lengths import DEFAULT_OUTPUT_TOKENS, LengthSpec
from latency.execution.gen_handle import GenRunHandle
from latency.host.devices import available_devices
from latency.pipelines.registry import list_pipelines
from ui.controls import KEEP, default, model_arg_inputs
from ui.gen_controls import (
    cost_inputs,
    length_inputs,
    load_inputs,
    objective_inputs,
    scheduler_inputs,
    synthetic_lm_args,
    target_inputs,
)
from ui.gen_figures import generation_figures, headline_metrics, target_figures
from ui.machine import disturbed_badge
from ui.startup import named_targets
from ui.text import code_span, plain

PREFIX = "glive_"  # the widgets' keys (ui/gen_controls.py); they travel to a room
#: the generated text shown, per request, at most (plain text: never Markdown)
SAMPLE_CHARS = 600


@st.cache_resource(ttl=60, show_spinner=False)
def generative_infos() -> dict[str, Any]:
    """The generative pipelines this server can run: samples, entry points and the ones named
    when the server started."""
    return {i.name: i for i in list_pipelines() if i.generative}


#: a named server's entry among the pipelines (its name after it)
SERVER = "server: "


def run_controls() -> RunConfig:
    """The sidebar of a generation run; the RunConfig it describes."""
    infos = generative_infos()
    targets = named_targets()
    for line in targets.errors:
        st.sidebar.error(plain(line))
    sb = st.sidebar
    sb.header("Generation run")
    names = list(infos) + [f"{SERVER}{name}" for name in targets.urls]
    model = sb.selectbox("Pipeline", names,
                         index=default(f"{PREFIX}model", names.index("synthetic-lm")
                                       if "synthetic-lm" in names else 0, 0),
                         key=f"{PREFIX}model",
                         help=field_help("model") + " Your servers are those named when the "
                         "dashboard started (streamlit run app.py -- --target NAME=URL).",
                         **KEEP)
    if model.startswith(SERVER):
        return _target_controls(sb, model[len(SERVER):], targets.urls[model[len(SERVER):]])
    info = infos[model]
    sb.caption(plain(info.description)
               + ("" if info.origin == "sample" else f" · {plain(info.origin)}"))
    model_args: dict[str, Any] = (cost_inputs(sb, PREFIX) if model == "synthetic-lm"
                                  else model_arg_inputs(sb, info))
    if model == "synthetic-lm":  # (another pipeline's context is among its model arguments)
        ctx = synthetic_lm_args()["max_context"]
        context = int(sb.number_input(
            "Context (tokens)", int(ctx.low), int(ctx.high),
            default(f"{PREFIX}max_context", int(ctx.default), "min"), 1024,
            key=f"{PREFIX}max_context", help=f"synthetic-lm's max_context: {ctx.help}. A "
            "prompt and its output must fit it: long prompt lengths (a lognormal's tail) need "
            "more.", **KEEP))
        if context != ctx.default:
            model_args["max_context"] = context
    device = sb.selectbox("Device", available_devices(), key=f"{PREFIX}device",
                          help=field_help("device"), **KEEP)
    return RunConfig(model=model, model_args=model_args, device=device,
                     **_measuring(sb, with_scheduler=True))


def _measuring(sb: Any, with_scheduler: bool) -> dict[str, Any]:
    """What a run sends and for how long — lengths, load, (our scheduler,) objectives, its
    length — as RunConfig's fields: a pipeline's and a server of yours alike."""
    prompts, outputs = length_inputs(sb, PREFIX)
    load = load_inputs(sb, PREFIX, 4.0, ("poisson", "constant"))
    scheduler: dict[str, Any] = {}
    if with_scheduler:
        chosen = scheduler_inputs(sb, PREFIX)
        scheduler = {**chosen, "chunked_prefill": chosen["chunked_prefill"] or None,
                     "kv_tokens": chosen["kv_tokens"] or None}
    ttft, tpot, e2e = objective_inputs(sb, PREFIX)
    duration = sb.slider("Run length (s)", 2, 120, default(f"{PREFIX}duration", 10),
                         key=f"{PREFIX}duration", help=field_help("duration_s"), **KEEP)
    return dict(prompt_tokens=LengthSpec.of(prompts, "--prompt-tokens") if prompts else None,
                output_tokens=LengthSpec.of(outputs or DEFAULT_OUTPUT_TOKENS,
                                            "--output-tokens"),
                concurrency=load.clients, rate=load.rate,
                arrival=load.arrival if load.rate else "poisson", duration_s=float(duration),
                slo_ttft_ms=ttft, slo_tpot_ms=tpot, slo_e2e_ms=e2e, **scheduler)


def _target_controls(sb: Any, name: str, url: str) -> RunConfig:
    """A server of yours, named when the dashboard started: what to send it and how to read
    it; its scheduling is its own."""
    sb.caption(f"Your server **{plain(name)}** at `{code_span(url)}`: its slots, batching and "
               "KV cache are its own; the run measures it from outside and joins each "
               "request with what the server reports of it.")
    return RunConfig(target=url, **target_inputs(sb, PREFIX, "Read its /metrics over the run"),
                     **_measuring(sb, with_scheduler=False))


def render(handle: GenRunHandle, snap: GenSnapshot | None = None) -> GenSnapshot:
    """The run's live view, from one snapshot (returned)."""
    snap = snap or handle.snapshot()
    c = snap.config
    progress = snap.progress
    what = (f"your server at {c.target}" if c.target
            else f"{c.model} on {c.device}, {c.max_running} slots")
    head = (f"`{snap.run_id}` · {snap.status} · {what}, "
            + (f"{c.rate:g} requests/s" if c.rate else f"{c.concurrency or 1} client(s)"))
    st.markdown(head)
    if not snap.finished:
        done = float(progress.get("elapsed_s") or 0.0) / float(c.duration_s or 1.0)
        st.progress(min(max(done, 0.0), 1.0) if progress.get("phase") == "measuring" else 0.0,
                    text=f"{progress.get('phase', snap.status)} · "
                         f"{progress.get('measured', 0)} requests measured")
    s, v = snap.summary, snap.view
    if s is None:
        if snap.finished:
            st.error(f"The run {snap.status}: {plain(snap.failure or 'nothing measured')}")
        else:
            st.caption("Waiting for the first measured requests…")
        return snap
    result = handle.result() if snap.finished else None
    if result is not None:
        disturbed_badge(result.environment, note="Times inflated: the machine was busy while "
                        "this run measured.")
    headline_metrics(s)
    generation_figures(v, c.slo_ttft_ms, c.slo_tpot_ms, key="glivefig_",
                       shared=(snap.run_id, snap.version), outside=c.target is not None)
    if c.target is not None:  # live from the snapshot; when finished, the result's own
        rows = result.rows if result is not None else handle.rows_so_far()
        start = (result.timings.measure_start_ns if result is not None
                 else progress.get("measure_start_ns"))
        target_figures(snap.target, snap.server_metrics, rows, start)
    if result is not None:
        finished(result)
    return snap


def finished(result: Any) -> None:
    """What a finished run adds: verdict, validity, warnings, its text, its files."""
    st.info(f"**Verdict:** {plain(result.verdict)}")
    v = result.validity
    (st.error if not v.valid else st.warning if v.disturbed else st.success)(
        f"**Validity:** {plain(v.line())}")
    for w in result.warnings:
        st.warning(plain(w))
    if result.samples:
        with st.expander("What the model generated (a few requests, as text)"):
            for i, text in sorted(result.samples.items()):
                st.text(f"request {i}: {text[:SAMPLE_CHARS]}")
    # built when pressed: every token and step of the run, not on every viewer's refresh
    d1, d2 = st.columns(2)
    d1.download_button("Download the run (JSON)", lambda: result.json_text(),
                       file_name=f"{result.config.model}-generation.json",
                       mime="application/json", key="glivebtn_json", on_click="ignore")
    d2.download_button("Download the report (HTML)", lambda: _report(result),
                       file_name=f"{result.config.model}-generation.html", mime="text/html",
                       key="glivebtn_html", on_click="ignore",
                       help="one file that opens offline: the charts, the text and verdict, "
                            "the settings")


def _report(result: Any) -> bytes:
    from latency.figures.report import report_html, run_report

    return report_html(run_report(result, repr(result))).encode()


def saved_note(saved: str | None, error: str | None) -> None:
    """Under a finished run: its id in the history (where the simulator finds it), or why it
    could not be saved."""
    if saved:
        st.caption(f"Saved in the history as `{saved}`: `python -m latency history show "
                   f"{saved}`, or simulate it on the **Load Simulator** (generation, *Step costs "
                   "from*).")
    elif error:
        st.warning(f"This run was not saved to the history ({plain(error)}): download it to "
                   "keep it.")
