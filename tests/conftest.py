import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Tests never write to the user's run history: every run the suite saves (CLI subprocesses,
# the dashboard's run manager, the browser test's server inherit this) goes to a throw-away
# database. Set at import, before any test or fixture can open the default path.
import atexit as _atexit  # noqa: E402
import os as _os  # noqa: E402
import shutil as _shutil  # noqa: E402
import tempfile as _tempfile  # noqa: E402

_HISTORY_DIR = _tempfile.mkdtemp(prefix="latency-lab-test-history-")
_os.environ["LATENCY_LAB_DB"] = str(Path(_HISTORY_DIR) / "runs.sqlite")
_atexit.register(_shutil.rmtree, _HISTORY_DIR, True)


def rerun_until(at, done, timeout: float = 90.0) -> None:
    """Rerun an AppTest once a second (as the live fragment would) until ``done(at)`` holds."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not done(at):
        time.sleep(1)
        at.run()
