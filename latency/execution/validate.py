"""Full validation of a RunConfig: its values, then what needs the rest of the system.

``RunConfig.checked()`` (core) checks ranges and choices. This adds what only the upper stages
know: the pipeline exists (a name, or a ``--pipeline`` spec that imports) and accepts these
model-args, the inputs are readable, this machine has the device and can run the dtype, the
levers apply to this pipeline, and a ``--bodies`` file is readable. Everything fails here,
before anything runs: one line. The CLI checks the pipeline's own code (``user_code``) only in
the run process, where a module that crashes at import takes nothing else down.
"""
from __future__ import annotations

from latency.core.config import RunConfig
from latency.core.errors import ConfigError, PipelineError, error_text
from latency.core.optimization import LeverError, parse_levers
from latency.execution.lock import UnsafeLockDir, lock_dir, safe_dir
from latency.host.devices import check_device_dtype
from latency.loadgen.bodies import load_bodies
from latency.pipelines.contract import Pipeline
from latency.pipelines.gen_checks import generation_checked, target_generation_checked
from latency.pipelines.gen_workload import prompts_check
from latency.pipelines.inputs import check_inputs
from latency.pipelines.levers import check
from latency.pipelines.registry import PipelineSource, parse_model_args, source, split_model_args
from latency.serve.ray_serve import INSTALL_HINT, ray_installed


def validated(config: RunConfig, pipeline: Pipeline | None = None,
              machine_lock: bool = True, user_code: bool = True,
              generation: bool = False) -> RunConfig:
    """A checked copy of ``config`` with defaults, model-args and the pipeline's spec resolved;
    ConfigError if it cannot run here. ``pipeline``: an object the caller built, served as it
    is in this process (its model-args and device are its own). ``machine_lock``: the run will
    take the machine's run lock, so its directory must be safe to use (``serve`` takes none).
    ``user_code`` False: stop before anything imports or calls the pipeline's code (a module
    may crash or exit at import); the run process validates the rest. ``generation``: the
    caller runs a generation (``execution.gen_engine``); a generative pipeline is refused
    otherwise, in one line that says which flag makes it one."""
    c = config.checked()
    #: the run's length was given (a generation's default is shorter than a one-shot's)
    length_given = config.requests is not None or config.duration_s is not None
    if machine_lock:
        try:
            safe_dir(lock_dir())
        except OSError as exc:  # unsafe (UnsafeLockDir) or not creatable: before anything runs
            raise ConfigError(str(exc) if isinstance(exc, UnsafeLockDir) else
                              f"cannot use the run lock's directory {lock_dir()}: "
                              f"{exc.strerror or exc}") from None
    if pipeline is not None and (c.backend == "ray" or c.transport == "http"):
        # an object cannot move to a server process: only this process has it
        if generation and c.backend != "ray":
            raise ConfigError("a pipeline object is served in this process only: over "
                              "--transport http, name it (--pipeline module:Name or "
                              "file.py:Name), so the server process can build it")
        raise ConfigError("a pipeline object is served in this process: pass its class or "
                          "'module:Name' to serve it "
                          + ("on Ray Serve" if c.backend == "ray" else "over HTTP"))
    if c.backend == "ray" and not ray_installed():
        raise ConfigError(INSTALL_HINT)
    if c.bodies is not None:  # fails here, before anything runs
        load_bodies(c.bodies, require_json=c.target_protocol == "oip")
    if c.inputs is not None:
        c.inputs = check_inputs(c.inputs)  # made absolute: a run process finds it too
    if c.prompts is not None:  # the same checks and bounds, before anything runs
        # (each item a prompt or a conversation, checked on the one parse)
        c.prompts = check_inputs(c.prompts, "--prompts", prompts_check(c.reply_lengths, c.prompts))
    if generation and c.target is not None:
        target_generation_checked(c, length_given)  # someone else's server: nothing of ours
        return c
    if c.remote_model:
        return c  # a remote model: nothing of ours is built, bodies are sent as they are
    if not user_code:
        try:
            c.model_args = split_model_args(c.model_args)
        except PipelineError as exc:
            raise ConfigError(str(exc)) from None
        if c.pipeline is not None:  # named after its class until its module is imported
            c.model = c.pipeline.rsplit(":", 1)[-1].rsplit(".", 1)[-1] or c.model
        return c
    if pipeline is not None:
        c = _for_object(c, pipeline)
        generation_checked(c, type(pipeline), length_given, generation)
        return c
    try:
        src = source(c.model, c.pipeline)
        if c.pipeline is not None:  # a user's pipeline: named after itself, found by its spec
            c.pipeline, c.model = src.spec, src.name
        c.model_args = parse_model_args(src, c.model_args)
        src.check_args(c.model_args)
    except (PipelineError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    if c.inputs is None and src.cls is not None and c.bodies is None \
            and c.prompts is None and not _can_generate_inputs(src, c.model_args):
        raise ConfigError(f"{src.name} has no sample_inputs: give the run its inputs "
                          "(--inputs FILE|DIR)")
    check_device_dtype(c.device, c.dtype, src.dtypes)
    generation_checked(c, src.cls, length_given, generation)
    return _levers_checked(c, src)


def _can_generate_inputs(src: PipelineSource, args: dict) -> bool:
    """The pipeline's own ``can_generate_inputs``, its failure one line."""
    assert src.cls is not None
    try:
        return bool(src.cls.can_generate_inputs(args))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - user code, SystemExit included
        name = src.cls.__name__
        raise ConfigError(f"{name}.can_generate_inputs raised {error_text(exc)}") from None


def _for_object(c: RunConfig, pipeline: Pipeline) -> RunConfig:
    cls = type(pipeline)
    src = PipelineSource(getattr(cls, "name", cls.__name__), cls,
                         f"{cls.__module__}:{cls.__qualname__}", "object")
    c.model, c.pipeline, c.model_args = src.name, None, dict(getattr(pipeline, "args", {}))
    c.device, c.dtype = str(pipeline.device), str(pipeline.dtype).removeprefix("torch.")
    if c.inputs is None and c.bodies is None and not cls.has_sample_inputs():
        raise ConfigError(f"{src.name} has no sample_inputs: give the run its inputs")
    return _levers_checked(c, src)


def _levers_checked(c: RunConfig, src: PipelineSource) -> RunConfig:
    """``c`` with its levers parsed, once they are known to apply to ``src`` here."""
    try:
        c.optimize = parse_levers(c.optimize)
        check(src, c.optimize, c.device, c.dtype, c.pre, c.post)
    except LeverError as exc:
        raise ConfigError(str(exc)) from None
    return c

