"""NVIDIA AIPerf and GuideLLM, run as their users run them, against one OpenAI-compatible server.

``bench_llm_peers.py`` sets our client beside the two load generators people reach for when
they measure an LLM server. Neither is a dependency of this project, so each ``run_*`` here
returns ``None`` (with the reason printed) where its tool is not installed or its run fails,
and the benchmark goes on without it.

Each tool runs as a subprocess of its own CLI (what a user types), under a wall-clock
timeout, with no network: the tokenizer is a local directory (``hf_tokenizer_from_gguf``
makes one from the server's own GGUF vocabulary), ``HF_ENDPOINT`` points at a closed local
port so that a stray Hugging Face Hub call fails at once instead of waiting on a network this
machine may not have, and the tools' optional collectors that would make requests of their
own (AIPerf's server-metrics scrape and GPU telemetry) are off. The figures come from the
tools' own exports, read by the keys their writers use (AIPerf 0.13: ``profile_export_aiperf
.json``; GuideLLM 0.8: the JSON report), so each figure is the tool's own, not ours recomputed.

The runs are shaped alike: streamed chat completions, ``prompt_tokens`` of synthetic text,
``output_tokens`` forced by ``ignore_eos`` (llama.cpp honours it; ``min_tokens``, sent too for
vLLM/SGLang servers, llama.cpp ignores), ``clients`` requests in flight (closed loop),
``requests`` measured after ``warmup`` warm-up requests, and a fresh random seed per run so
that no run's prompts are already in the server's prompt cache from an earlier run.

The client's CPU is its process tree's user + system seconds: ``wait4``'s rusage of the
tool's process, which holds every descendant its parent waited for, checked against a
``psutil`` poll of the tree (which also sees a descendant that escaped being waited for);
the larger of the two is kept.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TIMEOUT_S = 600.0
#: A local port nothing listens on: the Hub client fails at once there, no network is touched.
_NO_HUB = "http://127.0.0.1:9"
_SPM_SPACE = "\u2581"  # SentencePiece's word-boundary mark


def hf_tokenizer_from_gguf(gguf: Path, out: Path) -> Path:
    """Write a Hugging Face tokenizer directory that tokenizes as the llama.cpp server does.

    Both tools need an HF tokenizer (AIPerf to size its synthetic prompts and, unless told to
    use the server's counts, to count tokens; GuideLLM to size its prompts) and this machine
    has no Hub: transformers builds one from the GGUF's vocabulary (``gguf_file``), offline.

    For a SentencePiece (``llama``) vocabulary the built tokenizer differs from llama.cpp on
    text that starts with a space: transformers' Metaspace pre-tokenizer adds the word mark
    only where the text does not already begin with one (``" hi"`` → ``▁hi``), llama.cpp
    always adds it (``add_space_prefix``: ``" hi"`` → ``▁ ▁hi``, one token more). The
    normalizer written here (prepend ``▁``, spaces to ``▁``, no pre-tokenizer) is the one the
    original Llama tokenizers ship, and matches llama.cpp's ``/tokenize`` token for token
    (BOS added as the server adds it with ``add_special``).

    Returns ``out``.
    """
    from transformers import AutoTokenizer

    gguf = Path(gguf).resolve()
    out = Path(out)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if _gguf_field(gguf, "tokenizer.ggml.model") == "llama":
        from tokenizers import normalizers

        backend = tok.backend_tokenizer
        steps: list[Any] = []
        if _gguf_field(gguf, "tokenizer.ggml.add_space_prefix") is not False:
            steps.append(normalizers.Prepend(_SPM_SPACE))  # llama.cpp's default for SPM
        steps.append(normalizers.Replace(" ", _SPM_SPACE))
        backend.normalizer = normalizers.Sequence(steps)
        backend.pre_tokenizer = None
    out.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(out))
    return out


def _gguf_field(gguf: Path, key: str) -> Any:
    """One scalar of a GGUF's metadata, or None where it is absent."""
    from gguf import GGUFReader

    field = GGUFReader(str(gguf)).fields.get(key)
    return None if field is None else field.contents()


def run_aiperf(base_url: str, model: str, tokenizer_dir: str, clients: int, requests: int,
               prompt_tokens: int, output_tokens: int, workdir: Path, *, warmup: int = 2,
               seed: int | None = None, server_token_count: bool = True,
               connection_reuse: str = "never", timeout_s: float = TIMEOUT_S
               ) -> dict[str, Any] | None:
    """One ``aiperf profile`` run; its figures from ``profile_export_aiperf.json``.

    Returns ``ttft_p50_ms`` (``time_to_first_token.p50``); ``itl_ms``: AIPerf's inter-token
    latency is per request, (request latency − TTFT) / (output tokens − 1), so the decode
    time over the gaps after the first token; the figure is its p50 over requests
    (``inter_token_latency.p50``, the request's mean gap, p50 across requests);
    ``tokens_per_s`` (``output_token_throughput.avg``: all measured output tokens over the
    profiling phase's duration); ``requests`` (``request_count``: successful requests of
    the profiling phase, warm-up excluded); ``errors`` (``error_request_count``, absent from
    the export when 0); ``cpu_s``; ``wall_s`` (the whole CLI run, start-up included).

    ``server_token_count`` (default) passes ``--use-server-token-count``: tokens are the
    server's ``usage`` counts. Without it AIPerf re-tokenizes the streamed text, which counts
    more tokens than were generated wherever detokenized text does not re-tokenize to the
    same ids (a random-weight model's output: 65–70 for 64), and that count feeds ITL and
    tokens/s. With it the input length AIPerf reports is the server's prompt count, chat
    template included (~91 for 64 tokens of text on a Llama 2 template).

    ``connection_reuse`` is AIPerf's ``--connection-reuse-strategy``; ``never`` (a fresh
    connection a request) by default because llama.cpp's server closes the connection after
    a streamed response although its headers say keep-alive: AIPerf's ``pooled`` default
    (aiohttp) then now and then sends a request on a connection the server has closed and
    records it as an error (``ServerDisconnectedError`` / ``ClientOSError``: 1–2 of 40
    requests here, none with ``never``). httpx (GuideLLM) sees the closed connection before
    reusing it.

    AIPerf's warm-up draws from the same prompt pool as the measured phase and wraps around
    it; ``--num-conversations requests + warmup`` makes every request's prompt distinct, so
    no measured request hits the server's prompt cache with a warm-up prompt.

    AIPerf must find the tokenizer *online*: with ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE``
    set (any value, even ``0``) it looks a local path up in the Hub cache and fails
    (``HFValidationError: Repo id must be in the form…``), so both are removed from its
    environment; ``HF_ENDPOINT`` at a closed port keeps it off the network all the same.
    """
    ready = _prepared("aiperf", clients, workdir, seed)
    if ready is None:
        return None
    exe, seed, run_dir = ready
    artifacts = run_dir / "artifacts"
    cmd = [
        exe, "profile",
        "--model", model, "--url", base_url, "--endpoint-type", "chat", "--streaming",
        "--tokenizer", str(tokenizer_dir),
        "--isl", str(prompt_tokens), "--isl-stddev", "0",
        "--osl", str(output_tokens), "--osl-stddev", "0",
        "--extra-inputs", "ignore_eos:true", "--extra-inputs", f"min_tokens:{output_tokens}",
        "--concurrency", str(clients), "--request-count", str(requests),
        "--warmup-request-count", str(warmup), "--num-conversations", str(requests + warmup),
        "--random-seed", str(seed), "--connection-reuse-strategy", connection_reuse,
        "--no-server-metrics", "--no-gpu-telemetry", "--ui-type", "none",
        "--artifact-dir", str(artifacts),
    ]
    if server_token_count:
        cmd.append("--use-server-token-count")
    env = _env(run_dir)
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.pop(var, None)
    proc = _run(cmd, env, run_dir, timeout_s)
    if not proc.ok("aiperf"):
        return None
    export = artifacts / "profile_export_aiperf.json"
    try:
        d = json.loads(export.read_text())
        return {
            "ttft_p50_ms": float(d["time_to_first_token"]["p50"]),
            "itl_ms": float(d["inter_token_latency"]["p50"]),
            "tokens_per_s": float(d["output_token_throughput"]["avg"]),
            "requests": int(d["request_count"]["avg"]),
            "errors": int((d.get("error_request_count") or {}).get("avg", 0)),
            "cpu_s": proc.cpu_s,
            "wall_s": proc.wall_s,
        }
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"aiperf: no figures in {export}: {type(e).__name__}: {e}; log {proc.log}")
        return None


def run_guidellm(base_url: str, model: str, tokenizer_dir: str, clients: int, requests: int,
                 prompt_tokens: int, output_tokens: int, workdir: Path, *, warmup: int = 2,
                 seed: int | None = None, timeout_s: float = TIMEOUT_S
                 ) -> dict[str, Any] | None:
    """One ``guidellm run`` (GuideLLM ≥ 0.6; ``guidellm benchmark`` before) with the
    ``concurrent`` profile; its figures from its JSON report.

    The run is given as a scenario file (``guidellm run -c scenario.json``), the same
    settings as the ``--backend kind=…,key=value`` strings of its CLI but with no quoting to
    get wrong (those strings split on commas and read each value as YAML). ``ignore_eos`` and
    ``min_tokens`` go in the backend's ``extras.body``, merged into every request body.

    GuideLLM counts ``max_requests`` over the whole run, warm-up included, so it is given
    ``requests + warmup``. Its warm-up (``warmup.value`` requests, ``mode: requests``) ends
    at the start of the request that follows the ``warmup + 1``-th completion, and requests
    are then counted by time window (those that complete inside it, their TTFT where the
    first token falls inside it), so the measured count is near ``requests``, not exactly it
    (39 of 42 sent at 1 client, 41–42 at 4 in our runs).

    Returns ``ttft_p50_ms`` (``metrics.time_to_first_token_ms.successful.median``);
    ``itl_ms``: GuideLLM's inter-token latency is per request, (last token − first token) /
    (output tokens − 1), and its distribution weights each request by its output tokens − 1;
    with every request forced to the same length that weighted median is the p50 over
    requests (``metrics.inter_token_latency_ms.successful.median``); ``tokens_per_s``
    (``metrics.output_tokens_per_second.successful.mean``: the time-weighted mean output
    token rate over the measured window, what its console prints as output tokens/s);
    ``requests`` / ``errors`` (``metrics.request_totals.successful`` / ``.errored``, the
    measured window); ``cpu_s``; ``wall_s``.

    Tokens are the server's ``usage`` counts (GuideLLM prefers response metrics; the
    tokenizer only sizes the prompts), so the prompt count it reports includes the chat
    template (~90 for 64 tokens of text). Its synthetic prompts start with a per-request
    prefix (``"1 0 m0 …"``), and before the run each of its processes sends ``GET /health``
    (5 at 4 clients); ``continuous_usage_stats`` is asked for in ``stream_options``.
    """
    ready = _prepared("guidellm", clients, workdir, seed)
    if ready is None:
        return None
    exe, seed, run_dir = ready
    report = run_dir / "benchmarks.json"
    scenario = {"spec": {
        "backend": {
            "kind": "openai_http", "target": base_url, "model": model,
            "request_format": "/v1/chat/completions", "stream": True, "timeout": 120.0,
            "extras": {"body": {"ignore_eos": True, "min_tokens": output_tokens}},
        },
        "profile": {"kind": "concurrent", "streams": [clients],
                    "warmup": {"value": warmup, "mode": "requests"}},
        "constraints": [{"kind": "max_requests", "count": requests + warmup}],
        "data": [{"kind": "synthetic_text", "prompt_tokens": prompt_tokens,
                  "output_tokens": output_tokens}],
        "tokenizer": {"kind": "huggingface_auto", "model": str(tokenizer_dir)},
        "seed": {"kind": "static", "value": seed},
        "outputs": [{"kind": "json", "path": str(report)}],
    }}
    scenario_path = run_dir / "scenario.json"
    scenario_path.write_text(json.dumps(scenario, indent=1))
    cmd = [exe, "run", "-c", str(scenario_path), "--disable-progress"]
    env = _env(run_dir)
    env["HF_HUB_OFFLINE"] = "1"  # GuideLLM loads a local path with the Hub off
    proc = _run(cmd, env, run_dir, timeout_s)
    if not proc.ok("guidellm"):
        return None
    try:
        b = json.loads(report.read_text())["benchmarks"][0]
        m = b["metrics"]
        return {
            "ttft_p50_ms": float(m["time_to_first_token_ms"]["successful"]["median"]),
            "itl_ms": float(m["inter_token_latency_ms"]["successful"]["median"]),
            "tokens_per_s": float(m["output_tokens_per_second"]["successful"]["mean"]),
            "requests": int(m["request_totals"]["successful"]),
            "errors": int(m["request_totals"]["errored"]),
            "cpu_s": proc.cpu_s,
            "wall_s": proc.wall_s,
        }
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        print(f"guidellm: no figures in {report}: {type(e).__name__}: {e}; log {proc.log}")
        return None


# --- running a tool -------------------------------------------------------------------------


@dataclass
class _Proc:
    rc: int | None  # None: killed at the timeout
    wall_s: float
    cpu_s: float
    log: Path

    def ok(self, name: str) -> bool:
        """True for a clean exit; otherwise print why (with the log's tail) and say False."""
        if self.rc == 0:
            return True
        why = "timed out" if self.rc is None else f"exit {self.rc}"
        try:
            tail = self.log.read_text(errors="replace")[-1500:]
        except OSError:
            tail = ""
        print(f"{name}: {why} after {self.wall_s:.0f} s; log {self.log}\n{tail}")
        return False


#: a virtual environment of the peers' own (``python -m venv DIR && DIR/bin/pip install
#: aiperf guidellm``): their dependencies are not this project's, and installed beside it
#: they change packages its tests rely on
PEERS_VENV = "LATENCY_LAB_PEERS_VENV"


def _tool(name: str) -> str | None:
    """The tool's console script: in ``$LATENCY_LAB_PEERS_VENV`` first, then beside this
    interpreter (its venv), then the PATH."""
    places = [Path(os.environ[PEERS_VENV]) / "bin"] if os.environ.get(PEERS_VENV) else []
    for place in [*places, Path(sys.executable).parent]:
        here = place / name
        if here.is_file() and os.access(here, os.X_OK):
            return str(here)
    return shutil.which(name)


def _prepared(tool: str, clients: int, workdir: Path, seed: int | None
              ) -> tuple[str, int, Path] | None:
    """(the tool's executable, the run's seed, a fresh run directory); None, said, where the
    tool is not installed."""
    exe = _tool(tool)
    if exe is None:
        print(f"{tool}: not installed (pip install {tool}), skipped")
        return None
    return exe, _seed() if seed is None else seed, _run_dir(Path(workdir), f"{tool}-c{clients}")


def _seed() -> int:
    """A seed of its own for each run: no run repeats another's prompts (prompt cache)."""
    return time.time_ns() % 1_000_000_007


def _run_dir(workdir: Path, prefix: str) -> Path:
    """A fresh directory under ``workdir`` for one run; the benchmark calls again and again
    with the same ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    for k in range(1, 10_000):
        d = workdir / f"{prefix}-{k:03d}"
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue
    raise RuntimeError(f"no free run directory under {workdir}")


def _env(run_dir: Path) -> dict[str, str]:
    """The tool's environment: no Hub (see module docstring), no telemetry, temporary files
    under the run's directory (AIPerf leaves its ``aiperf_mmap_*`` directories behind)."""
    env = dict(os.environ)
    tmp = run_dir / "tmp"
    tmp.mkdir(exist_ok=True)
    env.update({
        "HF_ENDPOINT": _NO_HUB, "HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1",
        "TMPDIR": str(tmp), "PYTHONUNBUFFERED": "1",
    })
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: Path, timeout_s: float) -> _Proc:
    """Run ``cmd`` in a session of its own, output to ``cwd/run.log``, killed (the whole
    session) at ``timeout_s``; its CPU as the module docstring says."""
    log = cwd / "run.log"
    with log.open("w") as out:
        out.write(" ".join(cmd) + "\n\n")
        out.flush()
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    tree = _TreeCpu(proc.pid)
    status: int | None = None
    usage = None
    deadline = t0 + timeout_s
    killed_at: float | None = None
    while True:
        # wait4 (not Popen.wait) so that the rusage of the process and its reaped
        # descendants is ours to read
        pid, st, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            status, usage = st, ru
            break
        tree.sample()
        now = time.monotonic()
        if killed_at is None and now > deadline:
            _signal_group(proc.pid, signal.SIGTERM)
            killed_at = now
        elif killed_at is not None and now > killed_at + 10:
            _signal_group(proc.pid, signal.SIGKILL)
        time.sleep(0.2)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here; Popen must not wait
    _signal_group(proc.pid, signal.SIGTERM)  # anything of the tool's still running
    rusage_cpu = usage.ru_utime + usage.ru_stime
    polled = tree.total()
    cpu = max(rusage_cpu, polled)
    with log.open("a") as out:
        out.write(f"\n[llm_peers] exit {proc.returncode}, wall {wall:.2f} s, cpu {cpu:.2f} s "
                  f"(rusage {rusage_cpu:.2f}, polled {polled:.2f})\n")
    rc = None if killed_at is not None else proc.returncode
    return _Proc(rc=rc, wall_s=wall, cpu_s=cpu, log=log)


def _signal_group(pgid: int, sig: int) -> None:
    """Signal the tool's session (its process group: the tool and what it started)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class _TreeCpu:
    """The CPU seconds of a process tree by polling (psutil, where installed): the last
    user + system seen of each process ever in the tree. A lower bound (a process's last
    0.2 s before it exits are missed), it catches descendants ``wait4`` cannot: those that
    were re-parented instead of waited for."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seen: dict[tuple[int, float], float] = {}
        try:
            import psutil

            self._psutil: Any = psutil
        except ImportError:
            self._psutil = None

    def sample(self) -> None:
        ps = self._psutil
        if ps is None:
            return
        try:
            root = ps.Process(self.pid)
            procs = [root] + root.children(recursive=True)
        except ps.Error:
            return
        for p in procs:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    self.seen[(p.pid, p.create_time())] = t.user + t.system
            except ps.Error:
                continue

    def total(self) -> float:
        return float(sum(self.seen.values()))
