"""`xmine` (or a Python script) in a child process that stops at a known point until the test lets it go on.

The kill tests interrupt a command mid-run. They wait on an event, never on time: the child
(this file run as a script) wraps one function of xmine, `MODULE:NAME` (or `MODULE:CLASS.METHOD`),
so that when its Nth call has returned (or, `before=True`, as its Nth call begins, before it runs)
it writes one line to a pipe the test reads and then blocks reading a second pipe whose writing
end only the test holds. The test's blocking read returns that line (the child is now stopped at
that point and cannot go further), or end-of-file when the child ended first (a failure with the
child's log, never a race). The test then signals the stopped child.

No product code knows about this: the wrap is made here, in the child, before xmine's CLI (or the
script) runs.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator


def _run_paused(at: str, nth: int, before: bool, ready_fd: int, go_fd: int, what: list[str]) -> None:
    module_name, name = at.split(":")
    owner = importlib.import_module(module_name)
    *path, name = name.split(".")  # "Class.method" wraps the method on its class
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    calls = 0

    def stop(where: str) -> None:
        os.write(ready_fd, f"{where} call {nth} of {at}\n".encode())
        os.read(go_fd, 1)  # blocks until the test writes or closes its end (or a signal ends us)

    def paused(*a, **kw):
        nonlocal calls
        if before:
            calls += 1
            if calls == nth:
                stop("stopped at the start of")
            return original(*a, **kw)
        result = original(*a, **kw)
        calls += 1
        if calls == nth:
            stop("paused after")
        return result

    setattr(owner, name, paused)
    kind, *args = what
    if kind == "script":
        code, *args = args
        sys.argv = ["-c", *args]
        exec(compile(code, "<paused script>", "exec"), {"__name__": "__main__"})
    else:
        from xmine.cli import run  # (the program: `main` and its end)

        sys.argv = ["xmine", *args]
        run()


@contextlib.contextmanager
def _paused_child(at: str, nth: int, before: bool, what: list[str]) -> Iterator[subprocess.Popen]:
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    log = tempfile.TemporaryFile(mode="w+")  # not a pipe: a child that writes much never blocks on it
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([sys.executable, str(Path(__file__)), at, str(nth), "before" if before else "after",
                             str(ready_w), str(go_r), *what], pass_fds=(ready_w, go_r), stdout=log, stderr=log,
                            env=env)
    os.close(ready_w)  # the child holds the only writing end: end-of-file when it ends
    os.close(go_r)
    try:
        line = os.read(ready_r, 4096)  # blocking: the child's line, or b"" once it has ended
        if not line:
            proc.wait()
            log.seek(0)
            raise AssertionError(f"the child ended (exit {proc.returncode}) before "
                                 f"{'call' if before else 'the end of call'} {nth} of {at}:\n{log.read()}")
        proc.log = log  # what it printed, for the test's messages
        yield proc
    finally:
        os.close(go_w)
        os.close(ready_r)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        log.close()


def paused_xmine(at: str, nth: int, *args, before: bool = False) -> contextlib.AbstractContextManager[subprocess.Popen]:
    """`xmine ARGS` in a child, stopped after the `nth` call of `at` ("module:function", looked up
    where it is called from, or "module:Class.method") has returned (`before`: as that call begins,
    before it runs); yields the stopped child. Fails when the child ends before it gets there. On
    leaving, a child still running is killed."""
    return _paused_child(at, nth, before, ["xmine", *map(str, args)])


def paused_script(at: str, nth: int, code: str, *args,
                  before: bool = False) -> contextlib.AbstractContextManager[subprocess.Popen]:
    """`python -c CODE ARGS` in a child, stopped as `paused_xmine` stops `xmine`."""
    return _paused_child(at, nth, before, ["script", code, *map(str, args)])


def log_of(proc: subprocess.Popen) -> str:
    proc.log.seek(0)
    return proc.log.read()


if __name__ == "__main__":
    # SIGINT as a user's terminal delivers it (a KeyboardInterrupt), even where the test runner was
    # started with SIGINT ignored (a background job of a non-interactive shell ignores it, and the
    # children inherit that): the tests that send it check what xmine does with it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _run_paused(sys.argv[1], int(sys.argv[2]), sys.argv[3] == "before", int(sys.argv[4]), int(sys.argv[5]),
                sys.argv[6:])
