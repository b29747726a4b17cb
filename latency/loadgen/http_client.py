"""The HTTP transport: a real HTTP/1.1 client with keep-alive and a connection pool.

Why one event loop (uvloop) with our lean keep-alive pool (``http1_pool``, httptools' C
parser): every in-flight request is multiplexed over pooled keep-alive connections by one
thread, and in closed loop the clients themselves are coroutines on that loop (``closed``), so
a request crosses no thread at all. CPU per request is what a load generator on the same
machine as the server must not waste — it is taken from the server. ``bench/bench_http.py``
measures it: ~70 µs a request for this whole profiling client (timing and recording included),
~115 µs for a bare aiohttp loop, ~185 µs for Locust, ~800 µs for ``requests`` with a thread per
connection. Open loop keeps the engine's sender thread (``time.sleep`` to each intended time is
finer than the event loop's millisecond timers) and hands each request to the loop.

How one request is timed (all ``perf_counter_ns`` on the loop thread):

    sent ─ encode body ─ [emulated uplink] ─ POST … read whole reply ─ [emulated downlink] ─ done

The server says how long it spent (``Server-Timing``: queue, preprocess, forward,
postprocess). ``network`` = (done − sent) − server time: sockets, HTTP, the OIP envelope, base64,
and the emulated WAN delay when there is one (recorded apart, per request, in ``emulated_ns``).
Only durations cross the wire (a remote server's clock is not ours), so the server's stamps are
laid out from ``received`` = sent + uplink share; the queue is placed before preprocess.
A reply without a usable breakdown is kept whole as network and flagged ``decomposed=False``;
when it did carry a ``Server-Timing`` header, the transport also remembers why that header was
no use (``timing_problem``), so the run can say "sent, but unusable" instead of "sent none".
"""
from __future__ import annotations

import asyncio
import itertools
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from latency.core.errors import error_text
from latency.core.records import Request
from latency.core.timing import now_ns
from latency.core.wan import WanProfile
from latency.loadgen.http1_pool import Pool
from latency.loadgen.loop_client import LoopClient
from latency.loadgen.wan import Link
from latency.serve.oip import (
    ALIASES,
    JSON_TYPE,
    TIMED,
    encode_request,
    error_message,
    parse_server_timing,
)

if TYPE_CHECKING:
    from latency.loadgen.generator import LoadDriver

#: a reply slower than this is an error (the run goes on).
REQUEST_TIMEOUT_S = 60.0

def split_target(url: str, model: str) -> tuple[str, str]:
    """(base URL, model name) of ``--target``: ``http://h:8000`` uses ``model``;
    ``http://h:8000/v2/models/resnet[/versions/1][/infer]`` names the model itself."""
    parts = urlsplit(url.rstrip("/"))
    path = parts.path
    base_path, sep, rest = path.partition("/v2/models/")
    if sep:
        name = rest.split("/")[0]
        if name:
            model = name
        path = base_path
    elif path.endswith("/v2"):
        path = path[:-3]
    return f"{parts.scheme}://{parts.netloc}{path}", model


class HttpTransport(LoopClient[Request]):
    """``send(r)`` posts ``r.raw`` to ``{base}/v2/models/{model}/infer``; the reply comes back
    through ``r.reply(r)`` with every stamp and transport fact filled in."""

    name = "http"

    def __init__(self, base_url: str, model: str, *, payload: str = "json",
                 wan: WanProfile | None = None, connections: int = 64, seed: int = 0,
                 prebuilt_bodies: bool = False, endpoint: str | None = None,
                 method: str = "POST", content_type: str = JSON_TYPE,
                 body_template: str | None = None) -> None:
        """``endpoint``: a plain HTTP target (any URL and method) instead of OIP's infer route;
        its bodies are the raw inputs as JSON, ``body_template`` with ``{input}`` replaced by
        that JSON, or prebuilt (``--bodies``)."""
        self.generic = endpoint is not None
        self.url = endpoint or f"{base_url.rstrip('/')}/v2/models/{model}/infer"
        self.payload = payload
        self.content_type = content_type
        self.template = body_template
        self.prebuilt = prebuilt_bodies  # raw inputs already are request bodies (--bodies)
        self.wan = wan if wan is not None and wan.active else None
        self.up = Link(self.wan, seed) if self.wan else None
        self.down = Link(self.wan, seed + 1) if self.wan else None
        self.connections = connections
        #: replies whose Server-Timing header was there but unusable → why (``UNUSABLE``);
        #: taken, one by one, as each request is recorded (``timing_problem``)
        self._unusable: dict[Request, str] = {}
        super().__init__("http-client")
        self._pool = Pool(self.url, connections, REQUEST_TIMEOUT_S, method)

    send = LoopClient.submit

    def _encode(self, raw: Any) -> tuple[bytes, str]:
        if self.prebuilt:
            return raw, self.content_type if self.generic else JSON_TYPE
        if self.generic:
            return generic_body(raw, self.template), self.content_type
        return encode_request(raw, self.payload)

    async def _exchange(self, r: Request) -> None:
        r.t_sent = now_ns()
        up_ns = down_ns = 0
        data = b""
        timing = None
        batch = None
        try:
            body, ctype = self._encode(r.raw)
            r.req_bytes = len(body)
            if self.up is not None:
                t = now_ns()
                await asyncio.sleep(self.up.delay_ns(len(body), t) / 1e9)
                up_ns = now_ns() - t
            status, headers, data = await self._pool.post(body, ctype)
            if b"server-timing" in headers:
                timing = headers[b"server-timing"].decode("latin-1")
            if b"latency-lab-batch" in headers:
                batch = headers[b"latency-lab-batch"].decode("latin-1")
            if not 200 <= status < 300 or (status != 200 and not self.generic):
                reason = (data[:200].decode("utf-8", "replace").strip() if self.generic
                          else error_message(data))
                r.error = f"HTTP {status}: {reason}"
        except Exception as exc:  # noqa: BLE001 - a failed exchange fails this request alone
            r.error = f"transport: {error_text(exc)}"
        if self.down is not None:
            t = now_ns()
            await asyncio.sleep(self.down.delay_ns(len(data), t) / 1e9)
            down_ns = now_ns() - t
        r.t_done = now_ns()
        r.resp_bytes = len(data)
        r.emulated_ns = up_ns + down_ns
        why = lay_out(r, timing, batch, up_ns)
        if why is not None:
            self._unusable[r] = why
        if r.reply is not None:
            r.reply(r)

    # ---- closed loop, natively on the event loop -------------------------------------------
    def run_closed(self, driver: LoadDriver, concurrency: int, count: int | None,
                   until_ns: int | None, warmup: bool) -> None:
        """``concurrency`` clients as coroutines on the loop, each sending its next request
        when the previous returns (the engine's closed loop, without a thread per client).
        After a stop, requests still in the server are waited for as the in-process loop
        waits (``STOP_DRAIN_S``, inside the run process's own grace before it is killed),
        then recorded as it records them (cancelled), not lost."""
        issued = itertools.count()

        async def client(ci: int) -> None:
            while (t_intended := driver.closed_due(issued, count, until_ns)) is not None:
                r = Request(driver.next_input(), ci, warmup, None, t_intended)
                driver.track(r)
                await self._exchange(r)
                if not driver.settle(r, driver.finish):  # given up on: recorded already
                    return

        async def all_clients() -> None:
            await asyncio.gather(*(client(i) for i in range(concurrency)))

        fut = asyncio.run_coroutine_threadsafe(all_clients(), self._loop)
        if driver.wait(fut.done):
            fut.result()  # what a client raised is raised here
        else:
            fut.cancel()  # abandon requests stuck in the server
            driver.unanswered()

    def timing_problem(self, r: Request) -> str | None:
        """Why ``r``'s reply had a Server-Timing header that gave no breakdown (a key of
        ``UNUSABLE``), None when it had a usable one or none at all. Asked once per recorded
        request: the answer is forgotten here."""
        return self._unusable.pop(r, None) if self._unusable else None


def generic_body(raw: Any, template: str | None = None) -> bytes:
    """A plain HTTP target's request body: the raw input as JSON (bytes are sent as they
    are), or ``template`` with ``{input}`` replaced by that JSON."""
    if isinstance(raw, (bytes, bytearray)) and template is None:
        return bytes(raw)
    if isinstance(raw, (bytes, bytearray)):
        raw = raw.decode("utf-8", "replace")
    text = json.dumps(raw)
    return (template.replace("{input}", text) if template else text).encode()


#: why a Server-Timing header that was sent gave no breakdown (what a run counts; the
#: summary words them, ``latency.analysis.transport_summary.UNUSABLE_WHY``): a stage with a
#: negative, non-finite or absurd duration; durations longer than the client's own time for
#: the request; no stage duration at all (malformed, or other metrics only).
UNUSABLE = ("duration", "longer", "malformed")


def timing_verdict(server_timing: str | None, client_ns: int
                   ) -> tuple[dict[str, int] | None, str | None]:
    """(breakdown, None) for a usable header; (None, why) for one that was sent but is no use
    (``why`` a key of ``UNUSABLE``); (None, None) when there was no header."""
    if server_timing is None:
        return None, None
    st = parse_server_timing(server_timing)
    parts = st.breakdown_ns()
    if parts is None:
        stages = {ALIASES.get(n.lower(), n.lower()) for n in st.unusable}
        return None, "duration" if stages & set(TIMED) else "malformed"
    if sum(parts.values()) > client_ns:
        return None, "longer"
    return parts, None


def lay_out(r: Request, server_timing: str | None, batch: str | None, up_ns: int
            ) -> str | None:
    """Fill the server-side stamps of ``r`` from the server's reported durations; returns why
    a Server-Timing header that was sent gave no breakdown (None: usable, or none sent).

    The components still telescope exactly: only ``sent`` and ``done`` are client clock
    readings, and every stamp in between is placed from them.
    """
    client = r.t_done - r.t_sent
    parts, why = timing_verdict(server_timing, client)
    if parts is None:
        # No breakdown (or one that cannot fit in what the client saw): all of it is the
        # client's observed time, kept whole as network and flagged.
        r.decomposed = False
        r.t_received = r.t_pre_start = r.t_pre_end = r.t_fwd_start = r.t_sent
        r.t_fwd_end = r.t_post_start = r.t_post_end = r.t_sent
        return why
    server = sum(parts.values())
    net = client - server
    rest = max(net - r.emulated_ns, 0)
    net_in = min(up_ns + rest // 2, net)
    r.t_received = r.t_sent + net_in
    r.t_pre_start = r.t_received + parts["queue"]
    r.t_pre_end = r.t_pre_start + parts["preprocess"]
    r.t_fwd_start = r.t_pre_end
    r.t_fwd_end = r.t_fwd_start + parts["forward"]
    r.t_post_start = r.t_fwd_end
    r.t_post_end = r.t_post_start + parts["postprocess"]
    if batch:
        try:
            bid, size, replica = (int(x) for x in batch.split(";"))
            r.batch_id, r.batch_size, r.replica = bid, size, replica
        except ValueError:
            pass
    return None
