"""An output never replaces what is not a regular file, and is written as ``open`` would
write it: a symlink is written through, a device or a pipe is written to, the umask holds."""
import os
import stat

import pytest

from latency.cli.main import main
from latency.storage.outputs import check_output, write_atomic

RUN = ["run", "--model", "synthetic", "--requests", "5", "--min-requests", "5", "--warmup", "0",
       "--quiet", "--no-save"]


def test_a_symlinked_output_is_written_through_and_the_link_stays(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert main([*RUN, "--json", str(link), "--force"]) == 0
    assert link.is_symlink() and link.resolve() == target
    assert target.read_text().startswith("{")


def test_a_fifo_is_written_to_and_never_replaced(tmp_path):
    """A pipe stands for any file that is not a regular one (/dev/null, /dev/stdout): as root,
    renaming a file over /dev/null replaced the machine's /dev/null."""
    import threading

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert main([*RUN, "--json", str(fifo)]) == 0  # no --force needed: nothing is lost
    reader.join(30)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and got[0].startswith(b"{")


def test_dev_null_is_written_to_not_replaced():
    before = os.stat("/dev/null")
    check_output("/dev/null", "--json")
    write_atomic("/dev/null", b"{}")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_output_respects_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        write_atomic(tmp_path / "new.json", "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == mode


def test_an_overwritten_output_keeps_its_mode(tmp_path):
    path = tmp_path / "kept.json"
    path.write_text("old")
    path.chmod(0o640)
    write_atomic(path, "new")
    assert path.read_text() == "new" and stat.S_IMODE(path.stat().st_mode) == 0o640
