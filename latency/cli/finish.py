"""A finished run's last steps on the command line, one-shot and generation alike: save it to
the history, then write its outputs."""
from __future__ import annotations

import sys
from typing import Any

from latency.cli.args import EXIT_FAILED


def save_and_write(result: Any, store: Any, name: str | None,
                   outputs: list[tuple[str, str]], data_of: Any, code: int) -> int:
    """A finished run's last steps, one-shot or generation alike: saved to the history first
    (a failing file write then loses nothing), then each output written atomically
    (``data_of(flag, run_id)``: its bytes; ``run_id`` None when not saved); a failure of
    either is one line and exit 1 unless the run already exits otherwise. Returns the exit
    code."""
    from latency.storage.outputs import write_atomic

    run_id = None
    if store is not None:
        try:
            run_id = store.save(result, name=name, source="cli")
        except Exception as exc:  # noqa: BLE001 - the result is printed; say so
            print(f"latency: warning: the run was not saved to the history {store.path}: "
                  f"{exc}", file=sys.stderr)
            code = code or EXIT_FAILED
        else:
            print(f"saved as run {run_id} (python -m latency history show {run_id})")
    for flag, path in outputs:
        try:
            write_atomic(path, data_of(flag, run_id))
        except OSError as exc:
            saved = (f"; the run was saved as {run_id} (python -m latency history export "
                     f"{run_id} ...)" if run_id else "")
            print(f"latency: error: cannot write {flag} {path}: {exc.strerror or exc}{saved}",
                  file=sys.stderr)
            code = code or EXIT_FAILED
    return code
