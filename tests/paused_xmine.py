"""`xmine` in a child process that stops at a known point until the test lets it go on.

The kill tests interrupt a command mid-run. They wait on an event, never on time: the child
(this file run as a script) wraps one function of xmine, `MODULE:NAME` (or `MODULE:CLASS.METHOD`), so that when its Nth
call has returned it writes one line to a pipe the test reads and then blocks reading a second
pipe whose writing end only the test holds. The test's blocking read returns that line (the
child is now stopped at that point and cannot go further), or end-of-file when the child ended
first (a failure with the child's log, never a race). The test then signals the stopped child.

No product code knows about this: the wrap is made here, in the child, before xmine's CLI runs.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator


def _run_paused(at: str, nth: int, ready_fd: int, go_fd: int, args: list[str]) -> None:
    module_name, name = at.split(":")
    owner = importlib.import_module(module_name)
    *path, name = name.split(".")  # "Class.method" wraps the method on its class
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    calls = 0

    def paused(*a, **kw):
        nonlocal calls
        result = original(*a, **kw)
        calls += 1
        if calls == nth:
            os.write(ready_fd, f"paused after call {nth} of {at}\n".encode())
            os.read(go_fd, 1)  # blocks until the test writes or closes its end (or a signal ends us)
        return result

    setattr(owner, name, paused)
    from xmine.cli import main

    sys.argv = ["xmine", *args]
    main()


@contextlib.contextmanager
def paused_xmine(at: str, nth: int, *args) -> Iterator[subprocess.Popen]:
    """`xmine ARGS` in a child, stopped after the `nth` call of `at` ("module:function", looked up
    where it is called from, or "module:Class.method") has returned; yields the stopped child. Fails when the child ends
    before it gets there. On leaving, a child still running is killed."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    log = tempfile.TemporaryFile(mode="w+")  # not a pipe: a child that writes much never blocks on it
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([sys.executable, str(Path(__file__)), at, str(nth), str(ready_w), str(go_r),
                             *map(str, args)], pass_fds=(ready_w, go_r), stdout=log, stderr=log, env=env)
    os.close(ready_w)  # the child holds the only writing end: end-of-file when it ends
    os.close(go_r)
    try:
        line = os.read(ready_r, 4096)  # blocking: the child's line, or b"" once it has ended
        if not line:
            proc.wait()
            log.seek(0)
            raise AssertionError(f"xmine ended (exit {proc.returncode}) before call {nth} of {at} "
                                 f"returned:\n{log.read()}")
        proc.log = log  # what it printed, for the test's messages
        yield proc
    finally:
        os.close(go_w)
        os.close(ready_r)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        log.close()


def log_of(proc: subprocess.Popen) -> str:
    proc.log.seek(0)
    return proc.log.read()


if __name__ == "__main__":
    _run_paused(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:])
