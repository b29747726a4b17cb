"""The Live Profiler's controls: widgets in, a RunConfig (and an SLO) out.

Every widget has a key bound to the URL (``bind="query-params"``) so an instructor can share a
link to a configuration, and keeps its value across pages (``persist_state="session"``). Every
widget's help text teaches what the setting changes; a widget that sets a RunConfig field takes
that field's help (``field_help``), so the tooltip and ``--help`` say the same thing.
"""
from __future__ import annotations

import os
from typing import Any

import streamlit as st

from latency.core.config import RunConfig, field_help
from latency.host.cores import usable_cores
from latency.host.devices import available_devices, supported_dtypes
from latency.pipelines.registry import list_pipelines
from latency.serve.ray_serve import ray_installed
from ui.text import plain

KEEP: dict[str, Any] = {"bind": "query-params", "persist_state": "session"}


def set_by_api(key: str) -> bool:
    """Whether ``key``'s value was set through the Session State API in this run, before its
    widget: the presenter's settings copied to a follower (ui/room.follow), a lesson's preset.
    (Not a widget's own value, a shared link's or one kept across pages: those are not.)"""
    try:
        from streamlit.runtime.state.session_state_proxy import get_session_state

        return bool(get_session_state().is_new_state_value(key))
    except Exception:  # noqa: BLE001 - another Streamlit: any value held counts
        return key in st.session_state


def default(key: str, value: Any, neutral: Any = None) -> Any:
    """A widget's default — or, when its value was just set through the Session State API
    (``set_by_api``), the ``neutral`` argument that passes none (``None``; a select box's
    ``index`` 0; a number input's ``"min"``). The widget shows the value set either way, and
    Streamlit logs "The widget with key … was created with a default value but also had its
    value set via the Session State API" for every follower's render otherwise. Only then: the
    default is what a shared link leaves out of the URL, so it stays the real one."""
    return neutral if set_by_api(key) else value


@st.cache_resource(ttl=60, show_spinner=False)
def pipeline_infos() -> dict[str, Any]:
    """The pipelines this server can run one request at a time — samples, installed entry
    points and the ones named when the server started (never code from a browser) — looked
    up once a minute. Generative pipelines are profiled from the command line
    (docs/generation.md), so they are not offered here."""
    return {i.name: i for i in list_pipelines()
            if i.name != "model-file" and not i.generative}


def model_arg_inputs(sb: Any, info: Any) -> dict[str, Any]:
    """A pipeline's own arguments as text inputs (``arg_<pipeline>_<name>``), those changed
    from their defaults out."""
    model_args: dict[str, Any] = {}
    if not info.model_args:
        return model_args
    with sb.expander("Model arguments"):
        for arg in info.model_args:
            key = f"arg_{info.name}_{arg.name}"
            value = st.text_input(arg.name, default(key, str(arg.default), ""), key=key,
                                  help=arg.help or None)
            if value != str(arg.default):
                model_args[arg.name] = value
    return model_args


def profiler_controls() -> tuple[RunConfig, float]:
    """Render the sidebar controls; return the configuration they describe and the SLO (ms)."""
    infos = pipeline_infos()
    sb = st.sidebar
    sb.header("Run settings")
    model = sb.selectbox("Pipeline", list(infos),
                         index=default("model", list(infos).index("synthetic"), 0),
                         key="model", help=field_help("model"), **KEEP)
    info = infos[model]
    sb.caption(plain(info.description)
               + ("" if info.origin == "sample" else f" · {plain(info.origin)}"))
    model_args: dict[str, Any] = model_arg_inputs(sb, info) if model != "synthetic" else {}
    if model == "synthetic":
        c1, c2, c3 = sb.columns(3)
        model_args["preprocess_ms"] = c1.number_input(
            "pre ms", 0.0, 200.0, default("pre_ms", 2.0, "min"), 0.5, key="pre_ms",
            help="Preprocess time per request.", **KEEP)
        model_args["forward_ms"] = c2.number_input(
            "fwd ms", 0.0, 500.0, default("fwd_ms", 5.0, "min"), 0.5, key="fwd_ms",
            help="Forward time per batch.", **KEEP)
        model_args["postprocess_ms"] = c3.number_input(
            "post ms", 0.0, 200.0, default("post_ms", 1.0, "min"), 0.5, key="post_ms",
            help="Postprocess time per request.", **KEEP)
        model_args["dist"] = sb.selectbox(
            "Stage-time distribution", ["constant", "exponential", "lognormal"],
            key="stage_dist",
            help="Constant stages queue only because of arrivals; exponential or lognormal "
                 "service times make queues (and tails) much longer at the same load.", **KEEP)
        with sb.expander("Failure modes"):
            model_args["error_rate"] = st.slider(
                "Error rate", 0.0, 0.5, default("error_rate", 0.0), 0.01, key="error_rate",
                help="Share of requests whose preprocessing raises: each fails alone, is "
                     "counted, and percentiles cover only the successful ones.", **KEEP)
            model_args["stall_ms"] = st.slider(
                "One model stall (ms)", 0, 1000, default("stall_ms", 0), 50, key="stall_ms",
                help="The model worker freezes once (at its 100th batch). In open loop every "
                     "request that arrives meanwhile carries the wait: coordinated omission, "
                     "measured honestly.", **KEEP)
    devices = available_devices()
    device = sb.selectbox("Device", devices, key="device",
                          help=field_help("device"), **KEEP)
    dtype = sb.selectbox("dtype", supported_dtypes(device), key="dtype",
                         help=field_help("dtype"), **KEEP)
    cores = usable_cores()
    threads = sb.slider("Threads per replica", 1, max(8, 2 * cores), default("threads", 1),
                        key="threads",
                        help=field_help("threads"), **KEEP)
    replicas = sb.slider("Replicas", 1, 8, default("replicas", 1), key="replicas",
                         help=field_help("replicas"), **KEEP)
    batch = sb.slider("Max batch size", 1, 64, default("batch", 1), key="batch",
                      help=field_help("batch_size"), **KEEP)
    delay = sb.slider("Max batch delay (ms)", 0.0, 50.0, default("delay", 0.0), 0.5, key="delay",
                      help=field_help("max_batch_delay_ms"), **KEEP)
    mode = sb.radio("Load", ["closed loop", "open loop"], horizontal=True, key="mode",
                    help="Closed loop: N clients each wait for their answer before sending "
                         "again (load adapts to the server). Open loop: requests arrive at a "
                         "set rate whatever happens — like real users — so queues can grow.",
                    **KEEP)
    load: dict[str, Any] = {}
    if mode == "closed loop":
        load["concurrency"] = sb.slider("Concurrency (clients)", 1, 128, default("concurrency", 4),
                                        key="concurrency",
                                        help=field_help("concurrency"), **KEEP)
    else:
        load["rate"] = float(sb.slider("Arrival rate (req/s)", 1, 2000, default("rate", 100),
                                       key="rate", help=field_help("rate"), **KEEP))
        load["arrival"] = sb.radio("Arrivals", ["poisson", "constant"], horizontal=True,
                                   key="arrival", help=field_help("arrival"), **KEEP)
    duration = sb.slider("Run length (s)", 2, 120, default("duration", 10), key="duration",
                         help=field_help("duration_s"), **KEEP)
    slo = sb.number_input("SLO target (ms)", 0.1, 100000.0, default("slo", 50.0, "min"), 1.0,
                          key="slo",
                          help="Your latency objective: the histogram marks it and shows "
                               "the share of requests within it.", **KEEP)
    config = RunConfig(model=model, model_args=model_args, device=device, dtype=dtype,
                       batch_size=batch, max_batch_delay_ms=float(delay), replicas=replicas,
                       threads=threads, duration_s=float(duration), **load,
                       **transport_controls(sb))
    return config, float(slo)


#: the Ray cluster the dashboard's Ray Serve runs use, set where the server starts (a browser
#: never names one: connecting to a cluster trusts it with the server's process); unset, each
#: run starts and stops a local instance
RAY_ADDRESS_ENV = "LATENCY_LAB_RAY_ADDRESS"


def ray_cluster() -> str | None:
    """The server's Ray cluster address (``$LATENCY_LAB_RAY_ADDRESS``), None for a local
    instance."""
    return os.environ.get(RAY_ADDRESS_ENV, "").strip() or None


def transport_controls(sb: Any) -> dict[str, Any]:
    """Serving engine and transport selectors and the EMULATED WAN settings; RunConfig fields
    out. Ray Serve is offered only where it is installed (an optional extra)."""
    sb.subheader("Network")
    serving: dict[str, Any] = {}
    if ray_installed():
        engine = sb.radio("Serving backend", ["Latency Lab", "Ray Serve"], horizontal=True,
                          key="backend",
                          help=field_help("backend"), **KEEP)
        if engine == "Ray Serve":
            where = sb.radio("Preprocess on Ray", ["in the replica", "own deployment"],
                             horizontal=True, key="ray_preprocess",
                             help=field_help("ray_preprocess"), **KEEP)
            serving = {"backend": "ray", "ray_address": ray_cluster(), "ray_preprocess":
                       "deployment" if where == "own deployment" else "replica"}
    kind = "HTTP" if serving else sb.radio(
                    "Transport", ["in-process", "HTTP"], horizontal=True, key="transport",
                    help=field_help("transport"), **KEEP)
    if kind != "HTTP":
        return {"transport": "in-process"}
    if serving:
        where_ray = (f"the Ray cluster at {serving['ray_address']} (${RAY_ADDRESS_ENV})"
                     if serving["ray_address"] else "a local Ray instance each run starts "
                     f"(~20 s; ${RAY_ADDRESS_ENV} names a cluster)")
        sb.caption(f"Served on {where_ray}, reached over HTTP (Open Inference Protocol) "
                   "through Ray's proxy.")
    payload = sb.radio("Payload", ["json", "raw"], horizontal=True, key="payload",
                       help=field_help("payload"), **KEEP)
    with sb.expander("Emulated WAN", expanded=False):
        st.caption("EMULATED: the client holds each request and reply for the delay below; "
                   "no real network is involved.")
        rtt = st.slider("RTT (ms, emulated)", 0.0, 300.0, default("net_rtt", 0.0), 1.0,
                        key="net_rtt", help=field_help("net_rtt_ms"), **KEEP)
        jitter = st.slider("Jitter (ms, emulated)", 0.0, 50.0, default("net_jitter", 0.0), 0.5,
                           key="net_jitter",
                           help=field_help("net_jitter_ms"), **KEEP)
        bw = st.select_slider("Bandwidth (Mbit/s, emulated)",
                              ["1", "5", "10", "20", "50", "100", "1000", "unlimited"],
                              default("net_bw", "unlimited"),
                              key="net_bw", help=field_help("net_bandwidth_mbps"), **KEEP)
    return {**serving, "transport": "http", "payload": payload, "net_rtt_ms": float(rtt),
            "net_jitter_ms": float(jitter),
            "net_bandwidth_mbps": None if bw == "unlimited" else float(bw)}
