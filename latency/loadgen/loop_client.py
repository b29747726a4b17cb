"""What both HTTP clients share — the one-shot transport (``http_client``) and the streaming
client (``sse_client``): one event loop (uvloop) on a thread of its own, each request a task
on it, started from any thread, and an end that cancels what is in flight, closes the
connection pool and stops the loop.

Why one loop thread: every in-flight request is multiplexed over pooled keep-alive
connections by that thread, so a reply's bytes are stamped in the very read that brought them,
with no thread hop (``http_client``'s docstring has the measured cost per request).
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

#: what one exchange carries: a one-shot ``Request`` or a streamed ``GenRequest``
R = TypeVar("R")


def new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is in requirements.txt
        return asyncio.new_event_loop()


class LoopClient(Generic[R]):
    """A client's loop thread, its requests' tasks (by request) and its pool (``_pool``: an
    ``http1_pool.Pool`` or ``http1_stream.StreamPool``, set by the client)."""

    _pool: Any

    def __init__(self, thread_name: str) -> None:
        self._tasks: dict[R, asyncio.Task[None]] = {}
        self._loop = new_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=thread_name,
                                        daemon=True)
        self._thread.start()

    @property
    def retried(self) -> int:
        """Requests sent again on a fresh connection (``http1_pool.Pool.retried``)."""
        return int(self._pool.retried)

    def _exchange(self, req: R) -> Coroutine[Any, Any, None]:
        raise NotImplementedError

    def submit(self, req: R) -> None:
        """Start ``req``'s exchange on the loop (from any thread); its reply comes back
        through the request (``reply`` or ``on_done``)."""
        self._loop.call_soon_threadsafe(self._start, req)

    def _start(self, req: R) -> None:
        task = self._loop.create_task(self._exchange(req))
        self._tasks[req] = task
        task.add_done_callback(lambda _: self._tasks.pop(req, None))

    def close(self) -> None:
        """Cancel every exchange in flight (abandoned: the server sees its client go), close
        the pool, stop the loop and its thread."""
        async def shut() -> None:
            for task in list(self._tasks.values()):
                task.cancel()
            await asyncio.sleep(0)  # let the cancelled exchanges close their connections
            self._pool.close()

        try:
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(10)
        except Exception:  # noqa: BLE001 - closing must not fail a finished run
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
