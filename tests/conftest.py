import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def rerun_until(at, done, timeout: float = 90.0) -> None:
    """Rerun an AppTest once a second (as the live fragment would) until ``done(at)`` holds."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not done(at):
        time.sleep(1)
        at.run()
