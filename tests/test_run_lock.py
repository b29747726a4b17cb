"""One measurement at a time per machine: a CLI run and another run (the dashboard's, a
notebook's) queue behind each other; forced past the lock, both results say they overlapped."""
import json
import os
import stat
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from latency.core.config import RunConfig
from latency.execution.engine import execute
from latency.execution.lock import LOCK_DIR_ENV, MachineLock, UnsafeLockDir, lock_dir


def _cli_run(tmp_path, *extra):
    out = tmp_path / "first.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "latency", "run", "--model", "synthetic",
         "--model-arg", "preprocess_ms=0", "--model-arg", "forward_ms=1",
         "--model-arg", "postprocess_ms=0", "--duration", "2", "--warmup", "0", "--quiet",
         "--no-save", "--json", str(out), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, out


def _wait_for_holder(proc, timeout=60.0):
    lock = MachineLock("probe")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        holder = lock.holder()
        if holder is not None and _descends(holder.pid, proc.pid):  # the CLI's run process
            assert "CLI run" in holder.what
            return holder
        time.sleep(0.05)
    raise AssertionError("the CLI run never took the machine")


def _descends(pid: int, ancestor: int) -> bool:
    """Whether ``pid`` is a child of ``ancestor`` or of its child (a run process is forked by
    the fork server its caller started)."""
    import psutil

    try:
        return ancestor in [p.pid for p in psutil.Process(pid).parents()[:2]]
    except psutil.Error:
        return False


def _quick(**kw):
    return RunConfig(model="synthetic", model_args={"preprocess_ms": 0, "forward_ms": 1,
                                                    "postprocess_ms": 0},
                     requests=50, warmup=0, **kw)


def test_a_second_run_waits_for_the_first_and_they_never_overlap(tmp_path):
    proc, out = _cli_run(tmp_path)
    holder = _wait_for_holder(proc)
    seen = []
    r = execute(_quick(), on_rows=lambda rows, errs, p: seen.append(p),
                progress_interval_s=0.05)
    assert proc.wait(60) == 0, proc.stderr.read()
    first = json.loads(out.read_text())
    assert r.status == "completed"
    assert r.timings.waited_for_machine_s > 0.3
    # perf_counter_ns is system-wide on Linux: the second measured after the first finished
    assert r.timings.measure_start_ns >= first["timings"]["measure_end_ns"]
    waiting = [p for p in seen if p["phase"] == "waiting"]
    assert waiting and "CLI run" in waiting[0]["waiting_for"] and str(holder.pid) in \
        waiting[0]["waiting_for"]
    assert not any("same time" in w for w in r.summary.warnings + first["summary"]["warnings"])


def test_forced_past_the_lock_both_results_carry_a_warning(tmp_path):
    proc, out = _cli_run(tmp_path)
    _wait_for_holder(proc)
    r = execute(_quick(), force=True)
    assert proc.wait(60) == 0, proc.stderr.read()
    first = json.loads(out.read_text())
    assert r.status == "completed" and r.timings.waited_for_machine_s is None
    assert any("same time" in w and "CLI run" in w for w in r.summary.warnings)
    assert any("same time" in w and "forced" in w for w in first["summary"]["warnings"])


def test_a_run_stopped_while_it_waits_ends_at_once(tmp_path):
    # the holder measures 6 s: a run that waited for it would end 5 s or more from now
    proc, _ = _cli_run(tmp_path, "--duration", "6")
    _wait_for_holder(proc)
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    t = time.monotonic()
    r = execute(_quick(), cancel=cancel)
    assert time.monotonic() - t < 4, "the Stop did not end the wait"
    assert r.status == "stopped" and len(r.log) == 0
    assert any("waiting for another run" in w for w in r.summary.warnings)
    assert proc.wait(60) == 0


def test_a_killed_holder_frees_the_machine(tmp_path):
    proc, _ = _cli_run(tmp_path)
    _wait_for_holder(proc)
    proc.kill()
    proc.wait(10)
    t = time.monotonic()
    r = execute(_quick())
    assert r.status == "completed" and time.monotonic() - t < 30
    assert not any("same time" in w for w in r.summary.warnings)  # the dead run's note is gone


def test_the_lock_never_writes_through_a_symlink(tmp_path):
    """A link planted in the lock directory (holder.json → any file) is replaced, never
    followed: the file it names keeps its content."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    directory = tmp_path / "lock"
    directory.mkdir(mode=0o700)
    (directory / "holder.json").symlink_to(victim)
    (directory / "run-1-1.json").symlink_to(victim)  # a "note" that is a link: not read
    lock = MachineLock("probe", directory=directory)
    assert lock.acquire()
    assert not (directory / "holder.json").is_symlink()
    assert lock.holder() is not None and lock.holder().what == "probe"
    assert lock.release() == []
    assert victim.read_text() == "precious"


def test_a_linked_lock_file_is_refused_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    directory = tmp_path / "lock"
    directory.mkdir(mode=0o700)
    (directory / "run.lock").symlink_to(victim)
    with pytest.raises(OSError):
        MachineLock("probe", directory=directory).acquire()
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("make", ["symlink", "writable by others", "a file"])
def test_an_unsafe_lock_directory_is_refused_with_one_line(tmp_path, make):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    directory = tmp_path / "lock"
    if make == "symlink":
        directory.symlink_to(target, target_is_directory=True)
    elif make == "a file":
        directory.write_text("")
    else:
        directory.mkdir()
        directory.chmod(0o777)
    with pytest.raises(UnsafeLockDir, match="refusing to use it") as err:
        MachineLock("probe", directory=directory).acquire()
    assert "\n" not in str(err.value) and str(directory) in str(err.value)
    assert list(target.iterdir()) == []  # nothing written where the link points


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_lock_directory_of_another_user_is_refused(tmp_path):
    directory = tmp_path / "lock"
    directory.mkdir(mode=0o755)
    os.chown(directory, 65534, 65534)  # nobody
    with pytest.raises(UnsafeLockDir, match="belongs to another user"):
        MachineLock("probe", directory=directory).acquire()
    assert list(directory.iterdir()) == []


def test_each_user_has_a_lock_directory_of_their_own(monkeypatch, tmp_path):
    """One directory per user: a directory one user created is one another user may not write
    (a shared one locked every other user out)."""
    monkeypatch.delenv(LOCK_DIR_ENV)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    try:
        assert lock_dir() == tmp_path / f"latency-lab-lock-{os.geteuid()}"
        lock = MachineLock("probe")
        assert lock.acquire()
        lock.release()
        assert stat.S_IMODE(lock_dir().stat().st_mode) == 0o700
    finally:
        tempfile.tempdir = None


def test_an_unsafe_lock_directory_is_one_line_before_anything_runs(tmp_path, monkeypatch):
    """The CLI says it with exit 2 and measures nothing, saves nothing."""
    from latency.cli.main import main

    directory = tmp_path / "lock"
    directory.mkdir()
    directory.chmod(0o777)
    monkeypatch.setenv(LOCK_DIR_ENV, str(directory))
    out = tmp_path / "run.json"
    assert main(["run", "--model", "synthetic", "--requests", "5", "--quiet", "--no-save",
                 "--json", str(out)]) == 2
    assert not out.exists() and list(directory.iterdir()) == []
