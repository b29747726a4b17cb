"""The Python API for notebooks and scripts: ``latency.profile`` and ``latency.simulate``.

    import latency
    result = latency.profile(MyPipeline, inputs=raw_inputs, concurrency=8, requests=2000)
    result                   # the summary table and verdict, as the CLI prints them
    result.compare(other)    # the compare table
    latency.simulate(rate=150, service_ms=5)          # the queue, without a model

``profile`` runs the same engine as the command line. A pipeline given by name, by spec
(``"module:Name"``, ``"file.py:Name"``), or as a class or factory that lives in an importable
module runs in **its own process** (the default: the notebook's threads cannot disturb the
timings). A pipeline *object* — or a class defined in the notebook itself, which a fresh
process cannot import — runs **in this process**: its model is loaded here already. Pass
``in_process=True`` to choose that for any pipeline.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from latency.core.config import RunConfig
from latency.core.errors import ConfigError

if TYPE_CHECKING:
    from latency.analysis.gen_result import GenResult
    from latency.analysis.result import RunResult

_CONFIG_FIELDS = {f.name for f in fields(RunConfig)}


def _check_settings(settings: dict[str, Any]) -> None:
    """ConfigError (one line, naming every field) unless each setting is a RunConfig field."""
    unknown = sorted(set(settings) - _CONFIG_FIELDS)
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(unknown)}; RunConfig has: "
                          f"{', '.join(sorted(_CONFIG_FIELDS))}")


def _spec_of(target: Any) -> str | None:
    """'module:qualname' of a class or function a fresh process can import, else None."""
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", "")
    if not module or module == "__main__" or "<locals>" in qualname:
        return None
    mod = sys.modules.get(module)
    file = getattr(mod, "__file__", None)
    if module.startswith("latency_user_") and file:  # imported from a file by path
        return f"{Path(file).resolve()}:{qualname}"
    return f"{module}:{qualname}"


def profile(pipeline: Any = "synthetic", inputs: Sequence[Any] | str | Path | None = None, *,
            in_process: bool | None = None, prompts: Sequence[str] | str | Path | None = None,
            **settings: Any) -> RunResult | GenResult:
    """Profile a pipeline under load and return its RunResult (``repr``: the summary); a
    generative pipeline's streamed requests return a GenResult (TTFT, ITL, …).

    ``pipeline``: a name (``"image-cnn"``), a spec (``"mypkg.serving:Sentiment"``,
    ``"my_pipeline.py:Sentiment"``), a Pipeline subclass or factory, or a Pipeline object.
    ``inputs``: raw inputs (a list) or a path (a directory, a .jsonl or a text file).
    ``settings``: any RunConfig field — ``concurrency``, ``rate``, ``requests``,
    ``duration_s``, ``batch_size``, ``max_batch_delay_ms``, ``replicas``, ``model_args``,
    ``optimize``, ``transport``… (see ``latency.RunConfig``).
    ``prompts``: a generative pipeline's prompts (a list of texts, or a .jsonl/text file);
    with a generative pipeline (``GenerativePipeline``), the generation settings apply
    (``output_tokens``, ``prompt_tokens``, ``max_running``, ``chunked_prefill``, …) and the run
    is a generation, measured in this process.
    """
    _check_settings(settings)
    from latency.pipelines.contract import Pipeline  # torch: only now

    obj = None
    config_kw: dict[str, Any] = dict(settings)
    if isinstance(pipeline, Pipeline):
        obj = pipeline
        if in_process is False:
            raise ConfigError("a pipeline object is served in this process (its model is "
                              "loaded here): pass its class or 'module:Name' for a process")
        in_process = True
    elif isinstance(pipeline, str):
        if ":" in pipeline:
            config_kw["pipeline"] = pipeline
        else:
            config_kw["model"] = pipeline
    elif callable(pipeline):
        spec = _spec_of(pipeline)
        if spec is None:  # defined in the notebook: only this process knows it
            if in_process is False:
                raise ConfigError(f"{getattr(pipeline, '__qualname__', pipeline)} is defined "
                                  "in __main__, which a fresh process cannot import: move it "
                                  "to a module or file, or profile it in_process=True")
            obj = _build_here(pipeline, "__main__", config_kw)
            in_process = True
        else:
            config_kw["pipeline"] = spec
    else:
        raise ConfigError(f"profile() takes a pipeline name, spec, class, factory or object, "
                          f"not {type(pipeline).__name__}")
    if prompts is not None or _generative(pipeline, obj, config_kw):
        return _profile_generation(pipeline, obj, config_kw, prompts)
    values: list[Any] | None = None
    if isinstance(inputs, (str, Path)):
        config_kw["inputs"] = str(inputs)
    elif inputs is not None:
        values = list(inputs)
        if not values:
            raise ConfigError("inputs=[] holds no inputs")
    config = RunConfig(**config_kw)
    if in_process:
        from latency.execution.engine import execute

        return execute(config, inputs=values, pipeline=obj, who="latency.profile")
    from latency.execution.process import run

    return run(config, inputs=values)


def _generative(pipeline: Any, obj: Any, config_kw: dict[str, Any]) -> bool:
    """Whether this profile is a generation: a generative pipeline, or generation settings."""
    from latency.pipelines.generative import is_generative
    from latency.pipelines.registry import source

    if obj is not None:
        return is_generative(obj)
    if isinstance(pipeline, type):
        return is_generative(pipeline)
    if any(k in RunConfig.GENERATION_FIELDS for k in config_kw):
        return True
    try:
        cls = source(config_kw.get("model", "synthetic"), config_kw.get("pipeline")).cls
    except Exception:  # noqa: BLE001 - validation says what is wrong, in one line
        return False
    return cls is not None and is_generative(cls)


def _profile_generation(pipeline: Any, obj: Any, config_kw: dict[str, Any],
                        prompts: Sequence[str] | str | Path | None) -> GenResult:
    from latency.execution.gen_engine import execute_generation

    texts: list[str] | None = None
    if isinstance(prompts, (str, Path)):
        config_kw["prompts"] = str(prompts)
    elif prompts is not None:
        texts = [str(p) for p in prompts]
        if not texts:
            raise ConfigError("prompts=[] holds no prompts")
    if obj is None and isinstance(pipeline, type):
        obj = _build_here(pipeline, pipeline.__module__, config_kw)
    return execute_generation(RunConfig(**config_kw), pipeline=obj, prompts=texts,
                              who="latency.profile")


def _build_here(pipeline: Any, module: str, config_kw: dict[str, Any]) -> Any:
    """Build a pipeline class or factory (of ``module``) in the caller's process, which alone
    may import it, with the config's settings."""
    import torch

    from latency.host.devices import DTYPES, resolve_device
    from latency.pipelines.registry import PipelineSource, parse_model_args

    src = PipelineSource(getattr(pipeline, "name", None) or pipeline.__name__, pipeline,
                         f"{module}:{pipeline.__qualname__}", "object")

    args = parse_model_args(src, config_kw.pop("model_args", None) or {})
    device = resolve_device(config_kw.get("device", "cpu"))
    dtype = DTYPES.get(config_kw.get("dtype", "float32"), torch.float32)
    torch.set_num_threads(int(config_kw.get("threads", 1)))
    return src.build(device, dtype, args)


def sweep(model: str | None = None, *, target: str | None = None,
          rates: Sequence[float] = (), concurrencies: Sequence[int] = (), points: int = 5,
          point_s: float = 15.0, ceiling_clients: int | None = None,
          max_duration_s: float = 600.0, attainment: float = 0.9, simulate: bool = True,
          db: str | Path | None = None, **settings: Any) -> Any:
    """Measure how much load a generation server takes while meeting its objectives: a
    floor (one client), a ceiling (every slot busy), points between — the same sweep as
    ``python -m latency sweep`` (docs/your-llm-server.md), each point a run saved in the
    history (``db``: another history file). Returns a ``SweepResult``: ``.points``,
    ``.predicted`` (the simulator beside each), ``.answer`` (the highest load meeting the
    objectives) and ``.to_dict()``.

    ``model``: a generative pipeline (``"synthetic-lm"``, ``"tiny-lm"``, a spec), or
    ``target``: your OpenAI-compatible server's URL; ``settings``: RunConfig fields (the
    objectives ``slo_ttft_ms``/``slo_tpot_ms``/``slo_e2e_ms``/``slo``, lengths, the
    scheduler…)."""
    import threading

    from latency.execution.sweep import SweepPlan, run_sweep, saved_runner
    from latency.execution.validate import validated
    from latency.simulation.sweep_prediction import predict_points
    from latency.storage.store import RunStore

    _check_settings(settings)
    named: dict[str, Any] = {"model": model} if model is not None else {}
    raw = RunConfig(**named, target=target, **{"duration_s": point_s, **settings})
    base = validated(raw, generation=True, user_code=raw.pipeline is None)
    plan = SweepPlan(base, rates=tuple(rates), concurrencies=tuple(concurrencies),
                     points=points, point_s=point_s, ceiling_clients=ceiling_clients,
                     max_duration_s=max_duration_s, attainment=attainment,
                     simulate=simulate).checked()
    store = RunStore(db)
    store.check_writable()
    return run_sweep(plan, saved_runner(store, threading.Event(), who="Python sweep"),
                     predict=predict_points)


def report(result: Any, path: str | Path) -> Path:
    """Write ``result`` — a run (``latency.run``, ``profile``) or a sweep (``sweep``) — as a
    report you can send: one self-contained HTML file (its charts, its text as the command
    line prints it, its settings) that opens offline, as ``--html`` writes it. Returns the
    path."""
    from latency.figures.report import report_html, run_report, sweep_report
    from latency.storage.outputs import write_flag

    made = (sweep_report(result) if hasattr(result, "sweep_id")
            else run_report(result, repr(result)))
    write_flag(str(path), report_html(made), "report")
    return Path(path)


def simulate(rate: float | None = None, *, service_ms: float | None = None,
             service_dist: str | None = None, service_cv: float | None = None,
             from_run: Any = None, replicas: int | None = None,
             batch_size: int | None = None, max_batch_delay_ms: float | None = None,
             arrival: str | None = None,
             preprocess_workers: int | None = None, requests: int | None = None,
             seed: int = 0, clients: int | None = None, db: str | None = None,
             **generation: Any) -> Any:
    """Simulate the serving system (no model runs) and return its SimSummary (``repr``: the
    summary, marked SIMULATED). ``from_run``: a RunResult, a run JSON/CSV path or a history
    id whose service times — and, unless given, its rate (or, for a closed-loop run, its
    clients), batching, replicas and preprocess workers — are taken. ``clients``: a closed
    loop of that many clients instead of arrivals at a rate. ``service_*``: the parametric
    service (None: ``ServiceModel``'s default). Every value is checked as the CLI checks it,
    by the same ``simulation_setup`` (ConfigError, the same one line).

    A generation run as ``from_run`` (a GenResult, its JSON or a history id): its
    server simulated step by step, the step cost fitted from its own steps; returns a
    GenResult labelled simulated. ``generation``: what to change — ``max_running``,
    ``max_step_tokens``, ``chunked_prefill`` (0: off), ``kv_tokens``, ``batching``,
    ``prompt_tokens``, ``output_tokens``, ``slo``/``slo_ttft_ms``/``slo_tpot_ms``/
    ``slo_e2e_ms``,
    ``decode_scale``/``prefill_scale`` (what-ifs: 0.6 is a 40 % faster call)."""
    from latency.simulation.setup import simulation_setup
    from latency.simulation.simulator import summarize_simulation
    from latency.storage.run_files import is_generation_file, load_generation, load_run

    gen_run = from_run if getattr(from_run, "kind", None) == "generation" else (
        load_generation(from_run, db) if isinstance(from_run, str)
        and is_generation_file(from_run, db) else None)
    if gen_run is not None:
        return _simulate_generation(gen_run, from_run, rate=rate, clients=clients,
                                    arrival=arrival, replicas=replicas, requests=requests,
                                    seed=seed, one_shot={
                                        "service_ms": service_ms, "service_dist": service_dist,
                                        "service_cv": service_cv, "batch_size": batch_size,
                                        "max_batch_delay_ms": max_batch_delay_ms,
                                        "preprocess_workers": preprocess_workers},
                                    generation=generation)
    if generation:
        raise ConfigError(f"{', '.join(sorted(generation))}: generation settings; give "
                          "from_run a generation run")
    setup = simulation_setup(
        rate=rate, clients=clients, replicas=replicas, batch_size=batch_size,
        max_batch_delay_ms=max_batch_delay_ms, arrival=arrival or "poisson",
        preprocess_workers=preprocess_workers,
        requests=100_000 if requests is None else requests, seed=seed,
        service_ms=service_ms, service_dist=service_dist, service_cv=service_cv,
        from_run=from_run, load=lambda source: load_run(source, db))
    return summarize_simulation(setup.config, setup.service)


def _simulate_generation(run: Any, named: Any, *, one_shot: dict[str, Any],
                         generation: dict[str, Any], **load: Any) -> Any:
    from latency.simulation.config import GEN_SETTINGS
    from latency.simulation.gen_replay import gen_replay

    wrong = sorted(k for k, v in one_shot.items() if v is not None)
    if wrong:
        raise ConfigError(f"{', '.join(wrong)}: one-shot settings; the run is a generation "
                          "(its scheduler's settings: max_running, chunked_prefill, …)")
    unknown = sorted(set(generation) - set(GEN_SETTINGS))
    if unknown:
        raise ConfigError(f"unknown simulation setting(s): {', '.join(unknown)}")
    g = dict(generation)
    return gen_replay(run, prompt_tokens=g.pop("prompt_tokens", None),
                      output_tokens=g.pop("output_tokens", None),
                      decode_scale=g.pop("decode_scale", 1.0),
                      prefill_scale=g.pop("prefill_scale", 1.0),
                      source=named if isinstance(named, str) else "the given run",
                      **load, **g).run()


__all__ = ["profile", "report", "simulate", "sweep"]
