"""Ray Serve as the serving engine of a run: the same pipeline, served by Ray's replicas
(actors placed across a Ray cluster), Ray's HTTP proxy and Ray's own batching
(``@serve.batch``: at most ``max_batch_size`` requests, at most ``batch_wait_timeout_s`` after
the first — the same rule as our ``BatchQueue``).

Why Ray Serve and not a home-made cluster: users who outgrow one machine move to an existing
distributed engine; what they need profiled is that engine, with its proxy and its actors.

What each replica measures, with its own clock (only durations leave a host: monotonic clocks
of two hosts cannot be subtracted):

    arrive ─(queue: a free preprocess thread)─▶ pre_start ─(preprocess)─▶ pre_end ─(queue:
    the batch fills, the replica frees)─▶ fwd_start ─(forward, whole batch)─▶ fwd_end ─(queue:
    earlier requests of the batch post-process)─▶ post_start ─(postprocess)─▶ post_end

It answers them as ``Server-Timing`` (and the batch as ``Latency-Lab-Batch``); the client's
time minus the server's is ``network``: the sockets, Ray's HTTP proxy and its router (and,
with ``--ray-preprocess deployment``, the hop between the two deployments, sent as
``hop`` for information). Every request is admitted at once (``max_ongoing_requests`` is
high), so waiting for a busy replica happens inside it, where it is measured as queue.

Preprocessing where the user chooses (``--ray-preprocess``): ``replica`` (in the model's
replica, the default, as our own server does) or ``deployment`` (a separate CPU deployment in
front of the model's: the raw input is preprocessed there and the tensor is shipped to the
model replica — a real design choice whose cost the run measures).

Started and stopped by the run (``RayServe``): a local Ray instance by default (logical CPUs
bounded to what the replicas ask, no dashboard, its logs in the run's own directory), or an
existing cluster by ``--ray-address`` (the app is deleted at the end, the cluster stays).
Ray is an optional extra (``requirements-ray.txt``): nothing here imports it at module level.
"""
from __future__ import annotations

import asyncio
import importlib.util
import itertools
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import torch

from latency.core.config import RunConfig
from latency.core.errors import error_text
from latency.core.timing import GIL_SWITCH_INTERVAL_S, now_ns
from latency.host.devices import synchronize
from latency.host.processes import pid_alive
from latency.serve.builder import prepare_pipeline
from latency.serve.http_app import error_response, infer_response, read_body, server_timing_ns
from latency.serve.oip import JSON_TYPE, ProtocolError, decode_request

APP_NAME = "latency-lab"
#: every request is admitted to a replica at once, so waiting for a busy one is measured
#: inside it (as queue) rather than hidden in Ray's router.
MAX_ONGOING = 4096
#: a deployment not running after this long (a cluster without the resources) is an error.
READY_TIMEOUT_S = 240.0
#: the port of Ray Serve's HTTP proxy on an existing cluster (Ray's own default).
CLUSTER_HTTP_PORT = 8000
#: the local instance's directory: /tmp/llray-<run pid>-… (Ray's socket paths must be short)
TEMP_PREFIX = "llray-"
INSTALL_HINT = "Ray Serve is not installed: pip install -r requirements-ray.txt"


def ray_installed() -> bool:
    """Whether Ray Serve can be imported here (the dashboard offers it only then)."""
    try:
        return importlib.util.find_spec("ray") is not None and \
            importlib.util.find_spec("ray.serve") is not None
    except (ImportError, ValueError):
        return False


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


# ---- what travels between the stages of one request ---------------------------------------
@dataclass
class Job:
    """One preprocessed request on its way to a batch (stamps: this replica's clock)."""

    item: Any
    t_arrive: int  # entered the model replica (after preprocess, in a separate deployment)
    t_pre_start: int = 0
    t_pre_end: int = 0


@dataclass
class Outcome:
    """What a model replica did with one request: its durations (ns), batch and answer."""

    durations: dict[str, int]
    batch: str
    response: Any = None
    error: str | None = None


def _inference_thread(threads: int) -> None:
    """Initialiser of a replica's forward and preprocess threads: inference mode for the
    thread's life (not per call: entering it costs ~20 µs inside the timed span) and its
    intra-op team (preprocessing's of one thread: it must not fight forward for cores)."""
    torch.set_num_threads(threads)
    torch.inference_mode().__enter__()


class _Stages:
    """The timed stages of one replica, shared by both deployments."""

    def __init__(self, config_dict: dict[str, Any], forward: bool) -> None:
        # the GIL hand-over our own server process uses: a thread woken from a stage's sleep
        # (or a reply) waits at most this long behind a busy one, not Python's default 5 ms
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        config = RunConfig.from_dict(config_dict)
        if config.device.startswith("cuda"):
            config.device = "cuda"  # Ray gives the replica its GPU as device 0
        self.config = config
        self.max_body = int(config.max_body_mb * 1024 * 1024)
        self.prepared = prepare_pipeline(config)
        self.pipeline = self.prepared.pipeline
        self.pre_pool = ThreadPoolExecutor(config.preprocess_workers, "pre",
                                           initializer=_inference_thread, initargs=(1,))
        self.fwd_pool = (ThreadPoolExecutor(1, "forward", initializer=_inference_thread,
                                            initargs=(config.threads,)) if forward else None)

    def describe(self) -> dict[str, Any]:
        report = self.prepared.optimization
        return {"timings": self.prepared.timings,
                "optimization": report.to_dict() if report is not None else None}

    async def receive(self, request: Any) -> tuple[Job, str | None] | Any:
        """An ingress's HTTP request up to its preprocessed job: (job, request id), or the
        response to send instead (another route, a bad body, a failed preprocess)."""
        model = self.config.model
        kind, response = _route(request, model)
        if kind != "infer":
            return response
        try:
            raw, rid = decode_request(await read_body(request, self.max_body, ProtocolError),
                                      request.headers.get("content-type", JSON_TYPE))
        except ProtocolError as exc:
            return error_response(exc.status, str(exc))
        t_arrive = now_ns()
        try:
            job = await asyncio.get_running_loop().run_in_executor(
                self.pre_pool, self.preprocess, raw, t_arrive)
        except Exception as exc:  # noqa: BLE001 - one bad request fails alone
            outcome = Outcome({"queue": 0, "preprocess": now_ns() - t_arrive, "forward": 0,
                               "postprocess": 0}, "-1;0;-1",
                              error=f"preprocess: {error_text(exc)}")
            return _reply(model, outcome, rid)
        return job, rid

    def preprocess(self, raw: Any, t_arrive: int) -> Job:
        job = Job(None, t_arrive, now_ns())
        job.item = self.pipeline.preprocess(raw)
        job.t_pre_end = now_ns()
        return job

    def run_batch(self, jobs: list[Job], batch_id: int, replica: int) -> list[Outcome]:
        """Forward the whole batch, then post-process its requests one by one (on the
        replica's forward thread: one batch at a time, as a replica of ours)."""
        pipeline, n = self.pipeline, len(jobs)
        batch = f"{batch_id};{n};{replica}"
        t0 = now_ns()
        try:
            out = pipeline.forward(pipeline.collate([j.item for j in jobs]))
            synchronize(pipeline.device)
            t1 = now_ns()
            outputs = pipeline.split(out, n)
        except Exception as exc:  # noqa: BLE001 - the whole batch failed together
            t1 = now_ns()
            return [Outcome(server_timing_ns(j.t_arrive, j.t_pre_start, j.t_pre_end, t0, t1,
                                             t1, t1), batch,
                            error=f"forward: {error_text(exc)}") for j in jobs]
        results = []
        for j, o in zip(jobs, outputs):
            j.item = None
            t_post = now_ns()
            response = error = None
            try:
                response = pipeline.postprocess(o)
            except Exception as exc:  # noqa: BLE001 - one bad request fails alone
                error = f"postprocess: {error_text(exc)}"
            timing = server_timing_ns(j.t_arrive, j.t_pre_start, j.t_pre_end, t0, t1, t_post,
                                      now_ns())
            results.append(Outcome(timing, batch, response, error))
        return results


# ---- the HTTP face of an ingress deployment -----------------------------------------------
def _reply(model: str, outcome: Outcome, rid: str | None, hop_ns: int | None = None) -> Any:
    timing = dict(outcome.durations)
    if hop_ns is not None:
        timing["hop"] = max(hop_ns, 0)  # not a server stage: the client counts it as network
    return infer_response(model, timing, outcome.batch, outcome.response, outcome.error, rid)


def _route(request: Any, model: str) -> tuple[str, Any]:
    """('infer', None) for an infer POST of ``model``, else ('done', the response)."""
    from starlette.responses import JSONResponse

    path = request.url.path.rstrip("/")
    parts = path.split("/")
    if path in ("/v2/health/ready", "/v2/health/live"):
        return "done", JSONResponse({"ready": True})
    if path == "/v2":
        return "done", JSONResponse({"name": "latency-lab on Ray Serve", "version": "1",
                                     "extensions": []})
    if len(parts) >= 4 and parts[1:3] == ["v2", "models"]:
        name = parts[3]
        if name != model:
            return "done", error_response(404, f"unknown model {name!r}; this server "
                                               f"serves {model!r}")
        if parts[-1] == "infer":
            if request.method != "POST":
                return "done", error_response(405, "infer takes POST")
            return "infer", None
        if len(parts) == 4 or parts[-1] == "ready":
            return "done", JSONResponse({"name": model, "ready": True, "platform": "pytorch",
                                         "versions": ["1"]})
    return "done", error_response(404, f"no route {request.method} {path}")


# ---- the deployments ------------------------------------------------------------------------
class ModelReplica:
    """A model replica: forward (batched by ``@serve.batch``) and postprocess; with
    ``--ray-preprocess replica`` also the HTTP ingress and preprocess."""

    def __init__(self, config_dict: dict[str, Any]) -> None:
        from ray import serve

        self.stages = _Stages(config_dict, forward=True)
        c = self.stages.config
        self.model = c.model
        # Ray's batching, one queue per replica: a batch is due at max_batch_size requests or
        # batch_wait_timeout_s after its first — our BatchQueue's rule
        self.forward_batch = serve.batch(max_batch_size=c.batch_size,
                                         batch_wait_timeout_s=c.max_batch_delay_ms / 1000.0
                                         )(self._forward)
        rank = getattr(serve.get_replica_context(), "rank", 0)
        self.rank = int(getattr(rank, "rank", rank) or 0)
        self.replicas = max(c.replicas, 1)
        self._ids = itertools.count()

    def describe(self) -> dict[str, Any]:
        return self.stages.describe()

    async def _forward(self, jobs: list[Job]) -> list[Outcome]:
        batch_id = next(self._ids) * self.replicas + self.rank  # unique across replicas
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.stages.fwd_pool, self.stages.run_batch, jobs,
                                          batch_id, self.rank)

    async def __call__(self, request: Any) -> Any:
        received = await self.stages.receive(request)
        if not isinstance(received, tuple):
            return received  # not an infer request, a bad body, or a failed preprocess
        job, rid = received
        return _reply(self.model, await self.forward_batch(job), rid)

    async def infer_item(self, item: Any) -> Outcome:
        """A preprocessed request from the preprocess deployment."""
        t = now_ns()  # preprocessed elsewhere: none of its time is this replica's
        return await self.forward_batch(Job(item, t, t, t))


class PreprocessIngress:
    """``--ray-preprocess deployment``: the HTTP ingress and preprocess, in front of the
    model's deployment; the tensor travels to a model replica through Ray."""

    def __init__(self, config_dict: dict[str, Any], model_handle: Any) -> None:
        self.stages = _Stages(config_dict, forward=False)
        self.model = self.stages.config.model
        self.handle = model_handle

    async def describe(self) -> dict[str, Any]:
        return await self.handle.describe.remote()

    async def __call__(self, request: Any) -> Any:
        received = await self.stages.receive(request)
        if not isinstance(received, tuple):
            return received
        job, rid = received
        t_call = now_ns()
        outcome = await self.handle.infer_item.remote(job.item)
        hop = now_ns() - t_call - sum(outcome.durations.values())  # Ray's hop, both ways
        outcome.durations["queue"] += job.t_pre_start - job.t_arrive
        outcome.durations["preprocess"] = job.t_pre_end - job.t_pre_start
        return _reply(self.model, outcome, rid, hop_ns=hop)


def build_app(config: RunConfig) -> Any:
    """The Ray Serve application of ``config``: the model's deployment (``replicas`` actors,
    each ``threads`` CPUs and a GPU when the device is CUDA), behind the preprocess
    deployment when ``ray_preprocess`` is ``deployment``."""
    from ray import serve

    gpu = 1 if config.device.startswith("cuda") else 0
    model = serve.deployment(ModelReplica, name="model", num_replicas=config.replicas,
                             ray_actor_options={"num_cpus": config.threads, "num_gpus": gpu},
                             max_ongoing_requests=MAX_ONGOING).bind(config.to_dict())
    if config.ray_preprocess != "deployment":
        return model
    return serve.deployment(PreprocessIngress, name="preprocess",
                            num_replicas=config.replicas,
                            ray_actor_options={"num_cpus": 1},
                            max_ongoing_requests=MAX_ONGOING).bind(config.to_dict(), model)


# ---- the engine's side: start, address, stop -----------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cluster_host(address: str) -> str:
    """The host of a Ray address (``ray://head:10001``, ``head:6379``; ``auto``: this one),
    where its Serve HTTP proxy listens."""
    if address in ("auto", "local"):
        return "127.0.0.1"
    host = urlsplit(address if "://" in address else f"ray://{address}").hostname
    return host or "127.0.0.1"


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A clear line within seconds when nothing listens at the address (Ray itself retries
    for minutes); ``auto`` is left to Ray (it reads the address of this machine's cluster)."""
    if address in ("auto", "local"):
        return
    parts = urlsplit(address if "://" in address else f"ray://{address}")
    try:
        port = parts.port or (10001 if address.startswith("ray://") else 6379)
    except ValueError:
        raise ConnectionError(f"--ray-address has a bad port: {address!r}") from None
    host = parts.hostname or "127.0.0.1"
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise ConnectionError(f"the Ray cluster at {address} is unreachable ({host}:{port}: "
                              f"{exc.strerror or exc})") from None


def cpus_needed(config: RunConfig) -> int:
    """Logical CPUs the deployments ask of a local instance."""
    pre = config.replicas if config.ray_preprocess == "deployment" else 0
    return config.replicas * config.threads + pre


@dataclass
class RayServe:
    """Ray Serve for one run, with the face of ``ServerProcess``: ``start()``, ``url``,
    ``ready`` (the replica's build timings and optimisation report) and ``stop()``."""

    config: RunConfig
    url: str = ""
    ready: dict[str, Any] = field(default_factory=dict)
    #: where Ray wrote its logs (a local instance: under the run's own temporary directory)
    logs: str | None = None
    _started: bool = False
    _temp: str | None = None
    #: this process's environment before ``ray.init``, put back at stop
    _environ: dict[str, str] = field(default_factory=dict)

    @property
    def local(self) -> bool:
        return self.config.ray_address is None

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> RayServe:
        # gRPC (inside Ray) notes each later fork of this process at INFO: not the run's news
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
        try:
            import ray
            from ray import serve
        except ImportError:
            raise RuntimeError(INSTALL_HINT) from None
        c = self.config
        timings: dict[str, float] = {}
        t = time.perf_counter()
        self._environ = dict(os.environ)
        try:
            self._connect(ray)
        except BaseException:
            _restore_environment(self._environ)
            raise
        self._started = True
        timings["ray_start_s"] = time.perf_counter() - t
        try:
            t = time.perf_counter()
            port = _free_port() if self.local else CLUSTER_HTTP_PORT
            host = "127.0.0.1" if self.local else cluster_host(str(c.ray_address))
            # on a cluster whose Serve already runs, its own HTTP options stay: read them back
            serve.start(http_options={"host": "127.0.0.1" if self.local else "0.0.0.0",
                                      "port": port},
                        logging_config={"log_level": "WARNING", "enable_access_log": False})
            port = _proxy_port(serve, port)
            handle = self._deploy(serve, timeout_s)
            timings["deploy_s"] = time.perf_counter() - t
            described = handle.describe.remote().result(timeout_s=60)
            timings.update(described.get("timings") or {})
            self.ready = {"timings": timings, "optimization": described.get("optimization")}
            self.url = f"http://{host}:{port}"
        except BaseException:
            self.stop()
            raise
        return self

    def _connect(self, ray: Any) -> None:
        import logging

        # the run prints its own progress and reports its own errors
        logging.getLogger("ray").setLevel(logging.WARNING)
        logging.getLogger("ray.serve").setLevel(logging.ERROR)
        # "token authentication is enabled": right and kept, but not the run's news
        logging.getLogger("ray._private.authentication").setLevel(logging.ERROR)
        c = self.config
        common = {"include_dashboard": False, "log_to_driver": False,
                  "logging_level": "WARNING", "namespace": APP_NAME,
                  "ignore_reinit_error": False}
        if not self.local:
            _check_reachable(str(c.ray_address))
            try:
                ray.init(address=c.ray_address, runtime_env=_remote_env(), **common)
            except Exception as exc:  # noqa: BLE001 - one line for the user
                why = _first_line(exc)
                if "auth" in why.lower() or "token" in why.lower():
                    why += (" (a cluster with token authentication: set RAY_AUTH_MODE=token "
                            "and its token, as Ray's token-auth page says)")
                raise ConnectionError(f"the Ray cluster at {c.ray_address} is unreachable: "
                                      f"{why}") from None
            return
        # Ray's socket paths must stay short: a fresh directory under /tmp, removed at stop
        # (and, should a run have been killed, by the next run)
        base = "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()
        _remove_orphans(base)
        self._temp = tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=base)
        self.logs = os.path.join(self._temp, "session_latest", "logs")
        gpus = 1 if c.device.startswith("cuda") else 0
        ray.init(num_cpus=cpus_needed(c), num_gpus=gpus, _temp_dir=self._temp,
                 runtime_env={"env_vars": {"PYTHONPATH": _python_path()}}, **common)

    def _deploy(self, serve: Any, timeout_s: float) -> Any:
        """``serve.run`` in a thread, so that a cluster that cannot place the replicas is a
        clear error after ``timeout_s`` and not a wait without end."""
        app = build_app(self.config)
        out: list[Any] = []

        def run() -> None:
            try:
                out.append(serve.run(app, name=APP_NAME, route_prefix="/"))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                out.append(exc)

        worker = threading.Thread(target=run, name="ray-deploy", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if not out:
            c = self.config
            raise RuntimeError(f"Ray Serve did not start {c.replicas} replica(s) within "
                               f"{timeout_s:g} s (each asks {c.threads} CPU"
                               + (" and 1 GPU" if c.device.startswith("cuda") else "")
                               + "): does the cluster have them free?")
        if isinstance(out[0], BaseException):
            raise RuntimeError(f"Ray Serve could not start the pipeline: "
                               f"{_deploy_reason(out[0])}") from None
        return out[0]

    def stop(self) -> None:
        """Delete the app (an existing cluster keeps running) or shut the local instance."""
        if not self._started:
            return
        self._started = False
        try:
            import ray
            from ray import serve

            try:
                if not self.local:
                    serve.delete(APP_NAME)  # a local instance goes whole with ray.shutdown
            finally:
                ray.shutdown()
        except Exception:  # noqa: BLE001, S110 - stopping must not fail a finished run
            pass
        _restore_environment(self._environ)
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self.logs = None


def _restore_environment(before: dict[str, str]) -> None:
    """Undo what ``ray.init`` wrote into this process's environment: a local instance sets
    ``RAY_AUTH_MODE=token`` (and more), which a later run from the same process — a cluster
    without token auth, or any run process it starts, which inherits the environment — would
    take as its own and wait on for ever."""
    for key in set(os.environ) - set(before):
        del os.environ[key]
    for key, value in before.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def _remove_orphans(base: str) -> None:
    """Remove the Ray directories of local instances whose run process has died."""
    for name in os.listdir(base):
        if not name.startswith(TEMP_PREFIX):
            continue
        pid = name[len(TEMP_PREFIX):].split("-")[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)


def _proxy_port(serve: Any, asked: int) -> int:
    """The port Serve's HTTP proxy really listens on (Ray keeps no public accessor)."""
    try:
        return int(serve.context._get_global_client().http_config.port)
    except Exception:  # noqa: BLE001 - an older or newer Ray: what we asked for
        return asked


def _deploy_reason(exc: BaseException) -> str:
    """The user's own error out of Ray's (a replica's constructor traceback ends in it)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if ":" in line and not line.startswith(("File ", "^", "Traceback")):
            return line[:300]
    return error_text(exc)


def _python_path() -> str:
    """This process's import path for the replicas, so that a ``--pipeline module:Name``
    found from here is found there too."""
    paths = [os.getcwd()] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                             if p]
    return os.pathsep.join(dict.fromkeys(paths))


def _remote_env() -> dict[str, Any]:
    """An existing cluster gets this code with the job (Ray's ``py_modules``): its nodes
    need Python, Ray, torch and the pipeline's own packages installed, not Latency Lab. The
    package's folder is found from this file, not by importing it (``latency`` on top would
    be an import upward, of the API and every stage)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.find_spec("sample_models")
    samples = [os.path.dirname(spec.origin)] if spec is not None and spec.origin else []
    return {"py_modules": [package, *samples]}


__all__ = ["APP_NAME", "INSTALL_HINT", "RayServe", "build_app", "cluster_host",
           "cpus_needed", "ray_installed"]
