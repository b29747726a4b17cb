"""Run configuration: one dataclass, whose values check themselves.

``RunConfig.checked()`` checks what a value can know about itself — ranges, choices, which
settings exclude each other — and resolves defaults, importing nothing above ``core``. What
needs the rest of the system (does the pipeline exist, are its model-args valid, does this
machine have the device, can the levers apply) is ``latency.execution.validate``, which calls
``checked()`` first. Validation happens in the caller's process, before a run process is
spawned, so bad input costs nothing and fails with one line (``ConfigError``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from latency.core.errors import ConfigError
from latency.core.flags import flag, flags_of
from latency.core.lengths import DEFAULT_OUTPUT_TOKENS, LengthSpec, shared_prefix_of
from latency.core.optimization import LEVERS
from latency.core.slo import PRESETS as SLO_PRESETS
from latency.core.slo import Slo, slo_of
from latency.core.wan import MAX_BANDWIDTH_MBPS, MAX_RTT_MS, WanProfile

MAX_DURATION_S = 3600.0
MAX_REQUESTS = 10_000_000
MAX_CONCURRENCY = 1024
MAX_RATE = 100_000.0
#: one request every ~17 minutes: below it the intended send times overflow the ns clock
#: long before a run could end (and no run is longer than ``MAX_DURATION_S``)
MIN_RATE = 0.001
MAX_REPLICAS = 64
MAX_THREADS = 256
MAX_BATCH = 4096
MAX_DELAY_MS = 10_000.0
MAX_BODY_MB = 4096.0
MAX_WARMUP = 100_000
MAX_SEED = 2**32 - 1
MAX_BACKLOG = 1_000_000
MAX_GRACE_S = 600.0
#: our HTTP server's default request body limit (413 above it)
DEFAULT_MAX_BODY_MB = 32.0
ARRIVALS = ("poisson", "constant", "gamma")
#: gamma arrivals: the most and least burstiness (the gaps' shape; 1 is Poisson)
MIN_BURSTINESS, MAX_BURSTINESS = 0.01, 100.0
TRANSPORTS = ("in-process", "http")
#: who serves the pipeline: our server (in this process or its own), or Ray Serve
BACKENDS = ("builtin", "ray")
#: Ray Serve: preprocess in the model's replica, or in a deployment of its own in front
RAY_PREPROCESS = ("replica", "deployment")
INPUT_ORDERS = ("in-order", "shuffle")
TARGET_PROTOCOLS = ("oip", "http")
HTTP_METHODS = ("POST", "PUT", "GET")
#: how an HTTP request carries its input: OIP v2 JSON, or the raw bytes as the body.
PAYLOADS = ("json", "raw")
#: how a generation server batches: iteration-level (continuous) or a batch at a time (static)
BATCHING = ("continuous", "static")
#: the OpenAI-compatible APIs a generation --target is asked through
APIS = ("chat", "completions")
#: the longest one streamed request may take by default (``--request-timeout``)
DEFAULT_REQUEST_TIMEOUT_S = 600.0
#: generation limits: slots, a step's tokens, a KV budget
MAX_RUNNING = 4096
#: the most turns a chat session holds (its prompt grows by a turn's prompt and reply each)
MAX_TURNS = 64
MAX_STEP_TOKENS = 1_000_000
MAX_KV_TOKENS = 100_000_000

#: the sub-commands that take a field as a flag (its ``Flag.commands``)
RUN, AB, SERVE, EXPORT = "run", "ab", "serve", "export"
#: commands that serve a pipeline, and those that also measure it under load
SERVED, MEASURED = (RUN, AB, SERVE), (RUN, AB)
#: the sections of a command's help, in this order
PIPELINE, SERVER, LOAD, INPUTS = "pipeline", "server", "load", "inputs"
TRANSPORT = "transport (network is the first component)"
GENERATION = "generation (a generative pipeline: streamed tokens)"
GROUPS = (PIPELINE, SERVER, LOAD, INPUTS, GENERATION, TRANSPORT)

__all__ = ["ConfigError", "RunConfig", "field_help", "positive_int"]


@dataclass
class RunConfig:
    """Everything that defines a profiling run. Times are in the unit their name says.

    Each field's ``metadata`` holds its ``Flag`` (``latency.core.flags``): the one statement
    of its flag, help and the commands that take it, read by the CLI's flags, the dashboard's
    tooltips and ``docs/cli.md``."""

    # ---- the pipeline: what is served
    model: str = field(default="synthetic", metadata=flag(
        "--model", "The pipeline, raw input → preprocess → model → postprocess → response: "
        "a sample, an installed entry point or a startup pipeline (named when the process "
        "started, e.g. `streamlit run app.py -- --pipeline file.py:Name`); `python -m latency "
        "models` lists them.", commands=(*SERVED, EXPORT), group=PIPELINE))
    model_args: dict[str, Any] = field(default_factory=dict, metadata=flag(
        "--model-arg", "A pipeline argument, repeatable (e.g. forward_ms=8); `models` lists "
        "each pipeline's.", commands=SERVED, group=PIPELINE, type="pairs", metavar="KEY=VALUE"))
    #: your own pipeline: "module.path:Name" or "/abs/path/file.py:Name" (``model`` is then
    #: its name); None for a pipeline known by name (samples, entry points, startup)
    pipeline: str | None = field(default=None, metadata=flag(
        "--pipeline", "Your own pipeline: module.path:Name or path/to/file.py:Name (a "
        "latency.Pipeline subclass or a factory returning one).", commands=(*SERVED, EXPORT),
        group=PIPELINE, metavar="SPEC"))
    # ---- the server: how it is served
    device: str = field(default="cpu", metadata=flag(
        "--device", "Where the model runs: cpu, cuda or cuda:N (only devices present on this "
        "machine).", commands=SERVED, group=SERVER))
    dtype: str = field(default="float32", metadata=flag(
        "--dtype", "Numeric type of the model: float32, bfloat16 or float16 (float16 needs "
        "CUDA). bfloat16/float16 halve memory traffic but only pay off where the hardware has "
        "fast kernels.", commands=SERVED, group=SERVER))
    batch_size: int = field(default=1, metadata=flag(
        "--batch-size", "Largest batch a replica runs: it takes up to this many waiting "
        "requests at once. Bigger batches raise throughput; each request then waits for the "
        "whole batch's forward pass.", commands=SERVED, group=SERVER, type="int"))
    max_batch_delay_ms: float = field(default=0.0, metadata=flag(
        "--max-batch-delay-ms", "Longest wait (ms) for a batch to fill, counted from its first "
        "request. Adds queueing at low load; helps at high load.", commands=SERVED,
        group=SERVER, type="float"))
    replicas: int = field(default=1, metadata=flag(
        "--replicas", "Model workers pulling from the same queue: more replicas serve more "
        "requests at once (if there are cores for them).", commands=SERVED, group=SERVER,
        type="int"))
    threads: int = field(default=1, metadata=flag(
        "--threads", "Intra-op threads each replica's forward pass may use. More threads speed "
        "up one big op but fight each other across replicas.", commands=SERVED, group=SERVER,
        type="int"))
    preprocess_workers: int = field(default=4, metadata=flag(
        "--preprocess-workers", "Server threads that preprocess requests.", commands=SERVED,
        group=SERVER, type="int"))
    # ---- the load: closed loop (concurrency) or open loop (rate), and its length
    concurrency: int | None = field(default=None, metadata=flag(
        "--concurrency", "Closed loop: this many clients, each sending again when its answer "
        "returns — the requests in flight at once (the load adapts to the server; more clients "
        "than it serves at once make a queue).", commands=MEASURED, group=LOAD, type="int",
        exclusive="load", default_text="1, without --rate"))
    rate: float | None = field(default=None, metadata=flag(
        "--rate", "Open loop: requests per second, sent on schedule whatever happens (like real "
        "users), so queues can grow; queueing explodes as it nears the server's capacity.",
        commands=MEASURED, group=LOAD, type="float", exclusive="load"))
    arrival: str = field(default="poisson", metadata=flag(
        "--arrival", "Open-loop arrivals: poisson (random gaps, bursty like real traffic), "
        "constant (evenly spaced) or gamma (gaps of a gamma distribution whose shape is "
        "--burstiness: below 1 burstier than Poisson, above 1 steadier; as vLLM's benchmark "
        "draws them).", commands=(RUN,), group=LOAD, choices=ARRIVALS,
        unset=True, default_text="poisson"))
    burstiness: float = field(default=1.0, metadata=flag(
        "--burstiness", "--arrival gamma: the gaps' shape (1: Poisson; 0.5: bursts and lulls; "
        "4: nearly even); the mean rate stays --rate.", commands=(RUN,), group=LOAD,
        type="float", metavar="SHAPE"))
    requests: int | None = field(default=None, metadata=flag(
        "--requests", "Measured requests.", commands=(RUN,), group=LOAD, type="int",
        exclusive="length", default_text="1000, without --duration"))
    duration_s: float | None = field(default=None, metadata=flag(
        "--duration", "Measured seconds, after the warm-up requests.", commands=MEASURED,
        group=LOAD, type="float", exclusive="length", defaults={AB: 3.0}))
    warmup: int = field(default=20, metadata=flag(
        "--warmup", "Warm-up requests first: timed and counted, not in the statistics.",
        commands=MEASURED, group=LOAD, type="int", defaults={AB: 10}))
    seed: int = field(default=0, metadata=flag(
        "--seed", "Seed of the random draws: the arrivals and the inputs (a simulation's "
        "service times).", commands=MEASURED, group=LOAD, type="int"))
    #: open loop: requests in flight beyond which a request due is dropped by overload
    #: (None: twice the requests of one second at the rate, from 64 to 20,000)
    max_backlog: int | None = field(default=None, metadata=flag(
        "--max-backlog", "Open loop: requests in flight beyond which one due is dropped by "
        "overload.", commands=(RUN,), group=LOAD, type="int", metavar="N",
        default_text="2 s of requests at the rate, 64 to 20,000"))
    #: open loop: how long the backlog is served after the last request is sent, before what
    #: still waits is dropped (None: half the planned length, from 2 to 30 s)
    drain_grace_s: float | None = field(default=None, metadata=flag(
        "--drain-grace", "Open loop: seconds the backlog is served after the last request is "
        "sent, then what waits is dropped.", commands=(RUN,), group=LOAD, type="float",
        metavar="S", default_text="half the run, 2 to 30 s"))
    #: a run with a higher share of failed requests is INVALID (exit 1)
    max_error_rate: float = field(default=0.01, metadata=flag(
        "--max-error-rate", "A run with a higher share of failed requests is INVALID: exit 1.",
        commands=(RUN,), group=LOAD, type="float", metavar="FRACTION"))
    #: LoadGen's minimum-sample rule: a run with fewer successful measured requests, or a
    #: shorter measurement, is INVALID (None: ``DEFAULT_MIN_REQUESTS``)
    min_requests: int | None = field(default=None, metadata=flag(
        "--min-requests", "A run with fewer successful measured requests is INVALID: exit 1 "
        "(0: no minimum).", commands=(RUN,), group=LOAD, type="int", metavar="N",
        default_text="29, the fewest whose slowest bounds the p90"))
    min_duration_s: float = field(default=0.0, metadata=flag(
        "--min-duration", "A run that measured for fewer seconds is INVALID: exit 1.",
        commands=(RUN,), group=LOAD, type="float", metavar="S"))
    #: a run measured on a busy machine (the validity check ``quiet machine``: other processes'
    #: CPU, steal, cgroup throttling, memory pressure) is INVALID rather than VALID and marked
    #: DISTURBED. A switch: ``run`` adds ``--require-quiet`` itself (a Flag has no switch
    #: type), with this help.
    require_quiet: bool = field(default=False, metadata=flag(
        "--require-quiet", "A run measured while the machine was busy (other processes' CPU, "
        "CPU steal, cgroup throttling or memory pressure past the quiet machine limits) is "
        "INVALID: exit 1. Without it such a run stays VALID, marked DISTURBED, with a machine "
        "finding that says by how much.", group=LOAD))
    # ---- the inputs
    input_pool: int = field(default=64, metadata=flag(
        "--input-pool", "How many sample inputs the pipeline makes (its sample_inputs(n, "
        "seed)); they are sent in turn.", group=INPUTS, type="int"))
    #: your own inputs: a directory (one raw input per file, as bytes), a JSON-lines file (one
    #: JSON value per line) or a text file (one input per line); None: the pipeline's
    #: ``sample_inputs(input_pool, seed)``
    inputs: str | None = field(default=None, metadata=flag(
        "--inputs", "Your own raw inputs: a directory (one per file, as bytes), a .jsonl file "
        "(one JSON value a line) or a text file (one a line).", commands=MEASURED,
        group=INPUTS, metavar="PATH"))
    input_order: str = field(default="in-order", metadata=flag(
        "--input-order", "Send --inputs in file order, or shuffled (seeded by --seed).",
        commands=(RUN,), group=INPUTS, choices=INPUT_ORDERS))
    # ---- serving engine: our server, or Ray Serve (over its HTTP proxy)
    backend: str = field(default="builtin", metadata=flag(
        "--backend", "Who serves the pipeline: builtin (Latency Lab's own server: preprocess "
        "pool, batch queue, replica threads) or ray (Ray Serve: replicas as Ray actors — no "
        "shared GIL, they are processes —, Ray's @serve.batch and its HTTP proxy, which "
        "network then includes; a local instance takes ~20 s to start; pip install -r "
        "requirements-ray.txt).",
        commands=(RUN,), group=TRANSPORT, choices=BACKENDS))
    #: Ray Serve: an existing cluster ("ray://head:10001", "head:6379", "auto"); None: a local
    #: instance started and stopped by the run
    ray_address: str | None = field(default=None, metadata=flag(
        "--ray-address", "--backend ray: an existing Ray cluster (ray://head:10001, head:6379, "
        "auto) instead of a local instance started by the run.", commands=(RUN,),
        group=TRANSPORT, metavar="ADDRESS"))
    ray_preprocess: str = field(default="replica", metadata=flag(
        "--ray-preprocess", "--backend ray: preprocess in the model's replica, or in a "
        "deployment of its own in front of it (the tensor then travels between actors: that "
        "hop counts as network).", commands=(RUN,), group=TRANSPORT, choices=RAY_PREPROCESS))
    # ---- transport: in-process, or real HTTP to our server or a target
    transport: str = field(default="in-process", metadata=flag(
        "--transport", "in-process: the client hands requests to the server thread (no "
        "network: the first component is the thread hand-off, shown as hand-off); http: a "
        "real server (our own, in its own process on 127.0.0.1) speaking the Open Inference "
        "Protocol (a generative pipeline: the OpenAI-compatible streaming API, each token "
        "stamped as its event is parsed), and a pooled keep-alive client (network = sockets, "
        "HTTP and JSON).",
        commands=(RUN,), group=TRANSPORT, choices=TRANSPORTS, unset=True,
        default_text="in-process, or http with --target or --backend ray"))
    payload: str = field(default="json", metadata=flag(
        "--payload", "json: OIP v2 JSON, binary inputs base64-encoded (a third bigger, plus "
        "encode/decode); raw: the input's bytes as the body (application/octet-stream).",
        commands=(RUN,), group=TRANSPORT, choices=PAYLOADS))
    target: str | None = field(default=None, metadata=flag(
        "--target", "Profile this OIP v2 endpoint (Triton, KServe, MLServer, `latency serve`) "
        "instead of starting a server; a /v2/models/NAME path names the model, else --model "
        "does.", commands=(RUN,), group=TRANSPORT, metavar="URL"))
    bodies: str | None = field(default=None, metadata=flag(
        "--bodies", "A JSON-lines file of request bodies to send as they are (instead of the "
        "pipeline's inputs).", commands=(RUN,), group=TRANSPORT, metavar="FILE"))
    #: how ``target`` is spoken to: oip (Open Inference Protocol v2) or http (any URL: the
    #: bodies are sent to it as they are, success is a 2xx status)
    target_protocol: str = field(default="oip", metadata=flag(
        "--target-protocol", "oip: an Open Inference Protocol v2 server; http: any URL (your "
        "own POST /predict server): bodies from --bodies or --inputs, success = a 2xx status, "
        "decomposed when it sends Server-Timing.", commands=(RUN,), group=TRANSPORT,
        choices=TARGET_PROTOCOLS))
    http_method: str = field(default="POST", metadata=flag(
        "--method", "HTTP targets: the request method (POST, PUT or GET).", commands=(RUN,),
        group=TRANSPORT))
    content_type: str = field(default="application/json", metadata=flag(
        "--content-type", "HTTP targets: the bodies' Content-Type.", commands=(RUN,),
        group=TRANSPORT))
    health_url: str | None = field(default=None, metadata=flag(
        "--health-url", "HTTP targets: GET this before the run; a 2xx means ready.",
        commands=(RUN,), group=TRANSPORT, metavar="URL"))
    body_template: str | None = field(default=None, metadata=flag(
        "--body-template", "HTTP targets: each body is this text with {input} replaced by the "
        "input as JSON, e.g. '{\"text\": {input}}'.", commands=(RUN,), group=TRANSPORT,
        metavar="TEXT"))
    net_rtt_ms: float = field(default=0.0, metadata=flag(  # EMULATED WAN (latency.loadgen.wan)
        "--net-rtt-ms", "EMULATED WAN: round-trip time added (ms), half before the request, "
        "half after the reply: 1–2 ms in a datacentre, 20–80 ms across a continent, 150+ ms "
        "across an ocean.", commands=(RUN,), group=TRANSPORT, type="float"))
    net_jitter_ms: float = field(default=0.0, metadata=flag(
        "--net-jitter-ms", "EMULATED WAN: extra random delay each way (ms), uniform in [0, "
        "this].", commands=(RUN,), group=TRANSPORT, type="float"))
    net_bandwidth_mbps: float | None = field(default=None, metadata=flag(
        "--net-bandwidth-mbps", "EMULATED WAN: link speed each way, in Mbit/s: a message waits "
        "bytes ÷ bandwidth (and for messages ahead of it); a 2 MB image at 20 Mbit/s costs "
        "0.8 s before the model sees it.", commands=(RUN,), group=TRANSPORT, type="float",
        default_text="unlimited"))
    max_body_mb: float = field(default=DEFAULT_MAX_BODY_MB, metadata=flag(
        "--max-body-mb", "Our HTTP server's request body limit, in MB (413 above it).",
        commands=(RUN, SERVE), group=SERVER, type="float"))
    #: optimisation levers (latency.pipelines.levers.LEVERS) and the pre/postprocess variants
    optimize: list[str] = field(default_factory=list, metadata=flag(
        "--optimize", f"Comma-separated optimisation levers: {', '.join(LEVERS)}.",
        commands=MEASURED, group=PIPELINE, type="list", metavar="LEVERS"))
    pre: str = field(default="fast", metadata=flag(
        "--pre", "Preprocessing variant — fast: vectorised; naive: the beginner's version "
        "(Python loops, needless conversions), same answers, slower. With --model-file: its "
        "stock preprocessing, image, text or tensor.", commands=MEASURED, group=PIPELINE))
    post: str = field(default="fast", metadata=flag(
        "--post", "Postprocessing variant — fast: top-k of a softmax; naive: every class's "
        "score in Python, serialised to JSON and parsed back. With --model-file: topk, argmax "
        "or raw.", commands=MEASURED, group=PIPELINE))

    # ---- generation: streamed requests to a generative pipeline (an LLM)
    #: (a ``LengthSpec`` from construction on: its text, a count or a spec are taken)
    prompt_tokens: LengthSpec | None = field(default=None, metadata=flag(
        "--prompt-tokens", "Generation: prompt length in tokens — N, uniform:MIN:MAX or "
        "lognormal:MEDIAN:SIGMA; each prompt is cut from the pipeline's sample text to that "
        "many tokens (its length is then measured by the tokenizer).", commands=(RUN,),
        group=GENERATION, metavar="SPEC", default_text="the sample prompts' own lengths"))
    output_tokens: LengthSpec = field(default=DEFAULT_OUTPUT_TOKENS, metadata=flag(
        "--output-tokens", "Generation: tokens each request generates — N, uniform:MIN:MAX or "
        "lognormal:MEDIAN:SIGMA; exactly that many, ignoring end-of-sequence (as the peers' "
        "benchmarks do) unless --stop-on-eos.", commands=(RUN,), group=GENERATION,
        metavar="SPEC", default_text=str(DEFAULT_OUTPUT_TOKENS)))
    prompts: str | None = field(default=None, metadata=flag(
        "--prompts", "Generation: your prompts, a .jsonl file (one JSON string, or an object "
        "with \"prompt\", a line), a .json array, or a text file (one prompt a line); "
        "conversations are taken too — ShareGPT's (\"conversations\": from human/gpt) or "
        "OpenAI's (\"messages\": role user/assistant): the first user turn is the prompt. "
        "Their lengths are measured by the tokenizer.", commands=(RUN,), group=GENERATION,
        metavar="FILE"))
    reply_lengths: bool = field(default=False, metadata=flag(
        "--reply-lengths", "Generation, with conversations in --prompts: each request "
        "generates as many tokens as its conversation's reply had (counted by the tokenizer; "
        "as vLLM's ShareGPT benchmark does), instead of --output-tokens.", group=GENERATION))
    turns: int = field(default=1, metadata=flag(
        "--turns", "Generation, closed loop: each client holds chat sessions of N turns — "
        "turn k sends the conversation so far (every earlier prompt and the reply the server "
        "gave) and a new message (the workload's next prompt): a server's prefix cache shows "
        "in the TTFT of later turns (the run prints TTFT by turn).", commands=(RUN,),
        group=GENERATION, type="int", metavar="N"))
    shared_prefix: str | None = field(default=None, metadata=flag(
        "--shared-prefix", "Generation: N:TOKENS — N prefixes of TOKENS tokens each, shared "
        "by the prompts in turn (request i starts with prefix i mod N): what a server's "
        "prefix cache saves shows in TTFT and in its cached tokens.", commands=(RUN,),
        group=GENERATION, metavar="N:TOKENS"))
    max_running: int = field(default=8, metadata=flag(
        "--max-running", "Generation: sequences the scheduler runs at once (its slots); more "
        "waiting requests queue for a slot.", commands=(RUN, SERVE), group=GENERATION, type="int"))
    max_step_tokens: int = field(default=2048, metadata=flag(
        "--max-step-tokens", "Generation: tokens one scheduler step may process (prompt "
        "tokens prefilled + one per decoding sequence); without --chunked-prefill every "
        "prompt must fit in it.", commands=(RUN, SERVE), group=GENERATION, type="int"))
    chunked_prefill: int | None = field(default=None, metadata=flag(
        "--chunked-prefill", "Generation: prefill prompts in chunks of at most N tokens, "
        "decoding the running sequences in the same steps (Sarathi-Serve's stall-free "
        "batching); without it a step that prefills decodes nothing.", commands=(RUN, SERVE),
        group=GENERATION, type="int", metavar="N", default_text="off: whole prompts"))
    kv_tokens: int | None = field(default=None, metadata=flag(
        "--kv-tokens", "Generation: the KV cache budget in tokens, shared by the running "
        "sequences; when a step needs more, the latest admitted is preempted and later "
        "recomputed.", commands=(RUN, SERVE), group=GENERATION, type="int", metavar="N",
        default_text="--max-running × the model's context"))
    batching: str = field(default="continuous", metadata=flag(
        "--batching", "Generation: continuous (iteration-level: a sequence joins or leaves "
        "at every step) or static (a new batch only when the last has finished: the "
        "contrast).", commands=(RUN, SERVE), group=GENERATION, choices=BATCHING))
    #: a switch: ``run`` adds ``--stop-on-eos`` itself, with this help
    stop_on_eos: bool = field(default=False, metadata=flag(
        "--stop-on-eos", "Generation: end a request at the model's end-of-sequence token "
        "(then it may generate fewer than --output-tokens).", group=GENERATION))
    slo: str | None = field(default=None, metadata=flag(
        "--slo", f"Generation: service-level objectives by name (MLPerf's, checked at p99; "
        f"goodput counts requests meeting them all): {', '.join(SLO_PRESETS)}.",
        commands=(RUN,), group=GENERATION, metavar="PRESET"))
    slo_ttft_ms: float | None = field(default=None, metadata=flag(
        "--slo-ttft-ms", "Generation: time-to-first-token objective (ms) a request must meet "
        "for goodput.", commands=(RUN,), group=GENERATION, type="float", metavar="MS"))
    slo_tpot_ms: float | None = field(default=None, metadata=flag(
        "--slo-tpot-ms", "Generation: time-per-output-token objective (ms) a request must "
        "meet for goodput.", commands=(RUN,), group=GENERATION, type="float", metavar="MS"))
    slo_e2e_ms: float | None = field(default=None, metadata=flag(
        "--slo-e2e-ms", "Generation: whole-request (E2E) objective (ms) a request must meet "
        "for goodput, beside TTFT and TPOT.", commands=(RUN,), group=GENERATION,
        type="float", metavar="MS"))
    # ---- generation from a server of yours (--target URL with a generation flag)
    api: str | None = field(default=None, metadata=flag(
        "--api", "Generation from an OpenAI-compatible --target: chat (/v1/chat/completions) "
        "or completions (/v1/completions).", commands=(RUN,), group=GENERATION,
        choices=APIS, default_text="chat"))
    served_model: str | None = field(default=None, metadata=flag(
        "--served-model", "Generation from a --target: the model name to ask the server for "
        "(its /v1/models lists them).", commands=(RUN,), group=GENERATION, metavar="NAME",
        default_text="the first model the server lists"))
    tokenizer: str | None = field(default=None, metadata=flag(
        "--tokenizer", "Generation from a --target: the served model's Hugging Face tokenizer "
        "(a directory with tokenizer.json): counts each streamed chunk's tokens, so gaps are "
        "per token, and cuts --prompt-tokens prompts. 'server': the server's own /tokenize "
        "(vLLM, llama.cpp, TGI), one request a reply.", commands=(RUN,), group=GENERATION,
        metavar="DIR|server"))
    api_key_env: str | None = field(default=None, metadata=flag(
        "--api-key-env", "Generation from a --target: the environment variable holding the "
        "API key, sent as a bearer token (never stored).", commands=(RUN,), group=GENERATION,
        metavar="VAR", default_text="OPENAI_API_KEY, if set"))
    #: a switch: ``run`` adds ``--scrape-metrics`` itself, with this help
    scrape_metrics: bool = field(default=False, metadata=flag(
        "--scrape-metrics", "Generation from a --target: read the server's Prometheus "
        "/metrics every second during the run and keep them with it, beside the client's "
        "figures.", group=GENERATION))
    request_timeout_s: float = field(default=DEFAULT_REQUEST_TIMEOUT_S, metadata=flag(
        "--request-timeout", "Generation over HTTP: the longest one streamed request may take "
        "(seconds); a stream that sends nothing for a tenth of it (at least 5 s) fails too.",
        commands=(RUN,), group=GENERATION, type="float", metavar="S"))

    @property
    def mode(self) -> str:
        return "open" if self.rate is not None else "closed"

    @property
    def planned_s(self) -> float | None:
        """The measured length as planned: its duration, or its requests at the open-loop
        rate (None for a closed loop of N requests: it ends when they are served)."""
        if self.duration_s:
            return float(self.duration_s)
        if self.rate and self.requests:
            return self.requests / self.rate
        return None

    def backlog_limit(self) -> int | None:
        """Open loop: requests in flight beyond which one due is dropped by overload."""
        if self.rate is None:
            return None
        if self.max_backlog is not None:
            return self.max_backlog
        return int(min(20_000, max(64, 2 * self.rate)))

    def drain_grace(self) -> float | None:
        """Open loop: seconds the backlog is served after the last request is sent."""
        if self.rate is None:
            return None
        if self.drain_grace_s is not None:
            return float(self.drain_grace_s)
        return min(30.0, max(2.0, 0.5 * (self.planned_s or 4.0)))

    @property
    def objectives(self) -> Slo:
        """What a generated request must meet to count for goodput: the preset's limits,
        each overridden by its own flag, and the E2E limit (``latency.core.slo``)."""
        return slo_of(self.slo, self.slo_ttft_ms, self.slo_tpot_ms, self.slo_e2e_ms)

    @property
    def wan(self) -> WanProfile:
        """The emulated link these settings describe."""
        return WanProfile(float(self.net_rtt_ms or 0.0), float(self.net_jitter_ms or 0.0),
                          None if self.net_bandwidth_mbps is None
                          else float(self.net_bandwidth_mbps))

    @property
    def remote_model(self) -> bool:
        """A remote target given its own bodies or inputs: nothing of ours is built."""
        return self.target is not None and (self.bodies is not None or (
            self.target_protocol == "http" and self.inputs is not None))

    def __post_init__(self) -> None:
        """Lengths are parsed once, here: every later reader gets a ``LengthSpec`` (a
        ConfigError, one line naming the flag, for text that is not one)."""
        if self.prompt_tokens is not None:
            self.prompt_tokens = LengthSpec.of(self.prompt_tokens, "--prompt-tokens")
        self.output_tokens = (DEFAULT_OUTPUT_TOKENS if self.output_tokens is None else
                              LengthSpec.of(self.output_tokens, "--output-tokens"))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mode"] = self.mode
        for name in ("prompt_tokens", "output_tokens"):  # as they are written on a command line
            d[name] = None if getattr(self, name) is None else str(getattr(self, name))
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})

    def checked(self) -> RunConfig:
        """A copy with defaults resolved, after checking every value that can be checked
        without the pipeline or the machine. Raises ConfigError (one line, naming the flag)."""
        c = RunConfig(**asdict(self))
        positive_int("batch-size", c.batch_size, MAX_BATCH)
        positive_int("replicas", c.replicas, MAX_REPLICAS)
        positive_int("threads", c.threads, MAX_THREADS)
        positive_int("preprocess-workers", c.preprocess_workers, MAX_THREADS)
        positive_int("input-pool", c.input_pool, 100_000)
        if not 0 <= c.max_batch_delay_ms <= MAX_DELAY_MS:
            raise ConfigError(f"--max-batch-delay-ms must be between 0 and {MAX_DELAY_MS:g}")
        whole_number("warmup", c.warmup, MAX_WARMUP)
        whole_number("seed", c.seed, MAX_SEED)
        if c.max_backlog is not None:
            positive_int("max-backlog", c.max_backlog, MAX_BACKLOG)
        if c.drain_grace_s is not None and not (isinstance(c.drain_grace_s, (int, float))
                                                and 0 < c.drain_grace_s <= MAX_GRACE_S):
            raise ConfigError(f"--drain-grace must be > 0 and <= {MAX_GRACE_S:g} s "
                              f"(got {c.drain_grace_s!r})")
        if not isinstance(c.require_quiet, bool):
            raise ConfigError(f"require_quiet must be True or False (got {c.require_quiet!r})")
        if not (isinstance(c.max_error_rate, (int, float)) and 0 <= c.max_error_rate <= 1):
            raise ConfigError(f"--max-error-rate must be a fraction from 0 to 1 "
                              f"(got {c.max_error_rate!r})")
        if c.min_requests is not None:
            whole_number("min-requests", c.min_requests, MAX_REQUESTS)
        if not (isinstance(c.min_duration_s, (int, float)) and
                0 <= c.min_duration_s <= MAX_DURATION_S):
            raise ConfigError(f"--min-duration must be from 0 to {MAX_DURATION_S:g} s "
                              f"(got {c.min_duration_s!r})")
        one_of("input-order", c.input_order, INPUT_ORDERS)
        if c.concurrency is not None and c.rate is not None:
            raise ConfigError("choose one load: --concurrency (closed loop) or --rate (open loop)")
        if c.rate is not None:
            if not (isinstance(c.rate, (int, float)) and MIN_RATE <= c.rate <= MAX_RATE):
                raise ConfigError(f"--rate must be from {MIN_RATE:g} to {MAX_RATE:g} "
                                  f"requests/s (got {c.rate!r})")
            one_of("arrival", c.arrival, ARRIVALS)
        else:
            c.concurrency = 1 if c.concurrency is None else c.concurrency
            positive_int("concurrency", c.concurrency, MAX_CONCURRENCY)
        if not (isinstance(c.burstiness, (int, float)) and not isinstance(c.burstiness, bool)
                and MIN_BURSTINESS <= c.burstiness <= MAX_BURSTINESS):
            raise ConfigError(f"--burstiness must be from {MIN_BURSTINESS:g} to "
                              f"{MAX_BURSTINESS:g} (got {c.burstiness!r})")
        if c.burstiness != 1.0 and (c.rate is None or c.arrival != "gamma"):
            raise ConfigError("--burstiness shapes gamma arrivals: give --rate and --arrival "
                              "gamma too")
        if c.requests is not None and c.duration_s is not None:
            raise ConfigError("choose one length: --requests or --duration")
        if c.requests is None and c.duration_s is None:
            c.requests = 1000
        if c.requests is not None:
            positive_int("requests", c.requests, MAX_REQUESTS)
        if c.duration_s is not None and not 0 < c.duration_s <= MAX_DURATION_S:
            raise ConfigError(f"--duration must be > 0 and <= {MAX_DURATION_S:g} s")
        if c.rate is not None and c.requests is not None and \
                c.requests / c.rate > MAX_DURATION_S:
            raise ConfigError(f"--requests {c.requests:,} at --rate {c.rate:g} would take "
                              f"{c.requests / c.rate / 3600:,.1f} h; a run is at most "
                              f"{MAX_DURATION_S:g} s (as --duration): fewer requests or a "
                              "higher rate")
        c._check_transport()
        c._check_generation()
        return c

    #: the generation fields and their flags: set on a one-shot pipeline, they are refused
    GENERATION_FIELDS = ("prompt_tokens", "output_tokens", "prompts", "max_running",
                         "max_step_tokens", "chunked_prefill", "kv_tokens", "batching",
                         "reply_lengths", "shared_prefix", "turns",
                         "stop_on_eos", "slo", "slo_ttft_ms", "slo_tpot_ms", "slo_e2e_ms", "api",
                         "served_model", "tokenizer", "api_key_env", "scrape_metrics",
                         "request_timeout_s")
    #: the generation fields only a --target takes (the server is someone else's)
    TARGET_FIELDS = ("api", "served_model", "tokenizer", "api_key_env", "scrape_metrics")
    #: the scheduler's fields, which a --target's own server decides
    SCHEDULER_FIELDS = ("max_running", "max_step_tokens", "chunked_prefill", "kv_tokens",
                        "batching")

    def generation_flags(self) -> list[str]:
        """The generation flags this config sets away from their defaults."""
        return self._flags_set(self.GENERATION_FIELDS)

    def _flags_set(self, fields: tuple[str, ...]) -> list[str]:
        """The flags of ``fields`` this config sets away from their defaults."""
        base, meta = RunConfig(), flags_of(RunConfig)
        return [meta[f].name for f in fields if getattr(self, f) != getattr(base, f)]

    def _check_generation(self) -> None:
        """The generation values (the pipeline's context is checked in ``validate``)."""
        if self.prompts is not None and self.prompt_tokens is not None:
            raise ConfigError("choose one: --prompts FILE (your prompts, their own lengths) "
                              "or --prompt-tokens SPEC (prompts cut to drawn lengths)")
        if self.prompts is not None and self.inputs is not None:
            raise ConfigError("a generation's inputs are its prompts: give --prompts, not "
                              "--inputs")
        if self.reply_lengths and self.prompts is None:
            raise ConfigError("--reply-lengths takes each conversation's reply length: give "
                              "--prompts FILE of conversations (ShareGPT's or OpenAI's)")
        if self.shared_prefix is not None:
            shared_prefix_of(self.shared_prefix)
        positive_int("turns", self.turns, MAX_TURNS)
        if self.turns > 1 and self.rate is not None:
            raise ConfigError("--turns needs a closed loop (--concurrency): a session's next "
                              "turn is sent when its reply has come")
        if self.turns > 1 and self.shared_prefix is not None:
            raise ConfigError("--turns and --shared-prefix: choose one (a session's later "
                              "turns share its history as their prefix already)")
        positive_int("max-running", self.max_running, MAX_RUNNING)
        positive_int("max-step-tokens", self.max_step_tokens, MAX_STEP_TOKENS)
        if self.chunked_prefill is not None:
            positive_int("chunked-prefill", self.chunked_prefill, MAX_STEP_TOKENS)
            if self.chunked_prefill > self.max_step_tokens:
                raise ConfigError(f"--max-step-tokens {self.max_step_tokens:,} is smaller "
                                  f"than a chunk (--chunked-prefill "
                                  f"{self.chunked_prefill:,}): a step must hold one chunk")
        if self.kv_tokens is not None:
            positive_int("kv-tokens", self.kv_tokens, MAX_KV_TOKENS)
        one_of("batching", self.batching, BATCHING)
        if self.batching == "static" and self.chunked_prefill is not None:
            raise ConfigError("--batching static prefills each batch whole: drop "
                              "--chunked-prefill (or use --batching continuous)")
        if not isinstance(self.stop_on_eos, bool):
            raise ConfigError(f"stop_on_eos must be True or False (got {self.stop_on_eos!r})")
        self.objectives  # noqa: B018 - one line if they are wrong
        rt = self.request_timeout_s
        if not isinstance(rt, (int, float)) or isinstance(rt, bool) or \
                not 1 <= rt <= MAX_DURATION_S:
            raise ConfigError(f"--request-timeout must be between 1 and {MAX_DURATION_S:g} s "
                              f"(got {rt!r})")
        self._check_target_generation()

    def _check_target_generation(self) -> None:
        """The flags of a generation from a --target: only with one, and not the
        scheduler's (the target's own server schedules)."""
        if self.api is not None:
            one_of("api", self.api, APIS)
        if self.target is None:
            given = self._flags_set(self.TARGET_FIELDS)
            if given:
                raise ConfigError(f"{', '.join(given)}: settings of a generation from a "
                                  "server of yours: give its --target URL too")
            return
        if not self.generation_flags():
            return  # a one-shot target (OIP or plain HTTP)
        ours = self._flags_set(self.SCHEDULER_FIELDS)
        if ours:
            raise ConfigError(f"{', '.join(ours)}: our scheduler's settings, but --target's "
                              "server schedules its own requests (set them on that server)")
        if self.prompt_tokens is not None and self.tokenizer is None:
            raise ConfigError("--prompt-tokens with a --target cuts prompts at the served "
                              "model's token boundaries: give its --tokenizer DIR (or "
                              "--tokenizer server, or your own --prompts FILE)")
        if self.api_key_env is not None and not str(self.api_key_env).strip():
            raise ConfigError("--api-key-env names an environment variable: it is empty")

    def _check_backend(self) -> None:
        """Ray Serve is reached over HTTP, through its proxy; it serves our pipeline, so it
        takes no remote target."""
        one_of("backend", self.backend, BACKENDS)
        one_of("ray-preprocess", self.ray_preprocess, RAY_PREPROCESS)
        if self.backend != "ray":
            if self.ray_address is not None or self.ray_preprocess != "replica":
                raise ConfigError("--ray-address and --ray-preprocess are for --backend ray")
            return
        if self.target is not None:
            raise ConfigError("--backend ray serves the pipeline itself: drop --target (to "
                              "profile a Ray Serve app that is already running, give its URL "
                              "as --target without --backend)")
        self.transport = "http"  # Ray Serve is reached through its HTTP proxy
        if self.ray_address is not None:
            addr = str(self.ray_address).strip()
            if not addr or any(ch.isspace() for ch in addr):
                raise ConfigError(f"--ray-address must be an address like ray://head:10001, "
                                  f"head:6379 or auto (got {self.ray_address!r})")
            self.ray_address = addr

    def _check_transport(self) -> None:
        """The transport's values; ``--target`` implies ``--transport http``."""
        self._check_backend()
        if self.target is not None and self.target_protocol != "oip" and \
                self.generation_flags():
            raise ConfigError("--target-protocol is for one-shot targets: a generation from "
                              "a --target speaks the OpenAI-compatible API (--api chat or "
                              "completions)")
        if self.target is not None:
            self.transport = "http"  # a target is always reached over HTTP
            parts = urlsplit(str(self.target))
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(f"--target must be an http:// or https:// URL, got "
                                  f"{self.target!r}")
            try:
                port = parts.port  # raises on a bad port
            except ValueError:
                raise ConfigError(f"--target has a bad port: {self.target!r}") from None
            if port == 0:
                raise ConfigError(f"--target has port 0, which no server listens on: "
                                  f"{self.target!r}")
            if parts.username is not None or parts.password is not None:
                raise ConfigError("--target must not carry a user name or password "
                                  "(user:password@host is not sent as credentials): give "
                                  "the URL without them")
        one_of("transport", self.transport, TRANSPORTS)
        one_of("payload", self.payload, PAYLOADS)
        for name, value, top in (("net-rtt-ms", self.net_rtt_ms, MAX_RTT_MS),
                                 ("net-jitter-ms", self.net_jitter_ms, MAX_RTT_MS)):
            if not isinstance(value, (int, float)) or not 0 <= value <= top:
                raise ConfigError(f"--{name} must be between 0 and {top:g} ms (got {value!r})")
        bw = self.net_bandwidth_mbps
        if bw is not None and (not isinstance(bw, (int, float))
                               or not 0 < bw <= MAX_BANDWIDTH_MBPS):
            raise ConfigError(f"--net-bandwidth-mbps must be > 0 and <= "
                              f"{MAX_BANDWIDTH_MBPS:g} (got {bw!r})")
        if self.wan.active and self.transport != "http":
            raise ConfigError("the emulated WAN (--net-*) delays HTTP messages: add "
                              "--transport http")
        if not isinstance(self.max_body_mb, (int, float)) or not 0 < self.max_body_mb <= \
                MAX_BODY_MB:
            raise ConfigError(f"--max-body-mb must be > 0 and <= {MAX_BODY_MB:g} "
                              f"(got {self.max_body_mb!r})")
        if self.bodies is not None and self.transport != "http":
            raise ConfigError("--bodies are HTTP request bodies: add --transport http or "
                              "--target URL")
        one_of("target-protocol", self.target_protocol, TARGET_PROTOCOLS)
        if self.target_protocol == "http":
            if self.target is None:
                raise ConfigError("--target-protocol http speaks to a --target URL")
            self.http_method = str(self.http_method).upper()
            one_of("method", self.http_method, HTTP_METHODS)
            if self.bodies is None and self.inputs is None:
                raise ConfigError("a plain HTTP target needs its request bodies: --bodies FILE "
                                  "(one body a line) or --inputs FILE|DIR (each input as "
                                  "JSON, or filled into --body-template)")
            if self.body_template is not None and "{input}" not in self.body_template:
                raise ConfigError("--body-template must contain {input} (where the input goes)")
            if self.health_url is not None:
                hp = urlsplit(self.health_url)
                if hp.scheme not in ("http", "https") or not hp.hostname:
                    raise ConfigError(f"--health-url must be an http(s) URL, got "
                                      f"{self.health_url!r}")
        elif self.body_template is not None or self.health_url is not None:
            raise ConfigError("--body-template and --health-url are for --target-protocol http")


def field_help(name: str) -> str:
    """What RunConfig field ``name`` means, as ``--help`` and the dashboard's tooltip say it."""
    return flags_of(RunConfig)[name].help


def whole_number(flag: str, value: Any, limit: int) -> None:
    """ConfigError unless ``value`` is a whole number from 0 to ``limit``."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= limit:
        raise ConfigError(f"--{flag} must be a whole number from 0 to {limit:,} (got {value!r})")


def one_of(flag: str, value: Any, choices: tuple[str, ...]) -> None:
    """ConfigError unless ``value`` is one of ``choices`` (a flag's ``choices``)."""
    if value not in choices:
        raise ConfigError(f"--{flag} must be one of: {', '.join(choices)}")


def positive_int(flag: str, value: Any, limit: int) -> None:
    """ConfigError unless ``value`` is a whole number from 1 to ``limit``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"--{flag} must be a whole number >= 1 (got {value!r})")
    if value > limit:
        raise ConfigError(f"--{flag} must be <= {limit} (got {value})")
