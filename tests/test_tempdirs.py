"""Temporary folders outside an output (xmine/tempdirs.py): a killed run's is removed by the next
run that makes one, said with its size; a live run's, one without an owner and other names stay."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

from xmine.tempdirs import OWNER, remove_orphans

KILLED = """
import sys, time
from pathlib import Path
from xmine.tempdirs import temporary_directory
tmp = temporary_directory("side")
(Path(tmp.name) / "store").mkdir()
(Path(tmp.name) / "store" / "emb-00000.npy").write_bytes(b"x" * 300_000)
print(tmp.name, flush=True)
time.sleep(600)
"""


def test_the_folder_of_a_killed_run_is_removed_by_the_next_and_nothing_else(tmp_path, monkeypatch, caplog):
    """(was: `search` killed by SIGKILL left its queries' store in /tmp for good, 17 MB a run)"""
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the child's temporary directory
    proc = subprocess.Popen([sys.executable, "-c", KILLED], stdout=subprocess.PIPE, text=True,
                            env=os.environ | {"TMPDIR": str(tmp_path)})
    killed = tmp_path / os.path.basename(proc.stdout.readline().strip())
    live = tmp_path / "xmine-side-live"
    live.mkdir()
    (live / OWNER).write_text(f"{socket.gethostname()} {os.getpid()}\n")  # this process: running
    other_host = tmp_path / "xmine-side-other"
    other_host.mkdir()
    (other_host / OWNER).write_text(f"not-{socket.gethostname()} 1\n")
    unowned = tmp_path / "xmine-side-unowned"  # an older xmine's, or not xmine's at all
    unowned.mkdir()
    users = tmp_path / "xmine-notes"
    users.write_text("a file, not a folder\n")
    remove_orphans(tmp_path)
    assert killed.is_dir()  # still running: kept
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    with caplog.at_level("INFO", logger="xmine"):
        remove_orphans(tmp_path)
    assert not killed.exists()
    assert live.is_dir() and other_host.is_dir() and unowned.is_dir() and users.is_file()
    said = [r.getMessage() for r in caplog.records]
    assert said == [f"{killed}: removed, the temporary files of an earlier xmine run that was killed (0.3 MB)"]
