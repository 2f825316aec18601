"""A Ray worker stopped inside a chosen function until the test kills it: kill tests that wait on
an event, never on time.

The test module's cluster runs `setup_hook(traps_dir, targets)` in each of its worker processes
(Ray's `worker_process_setup_hook`: run when the worker starts, before it loads or runs any task).
It wraps each target, "module:function" or "module:Class.method", in place in that process. Ray
ships a task's function, and an actor's class, by reference to its module (cloudpickle writes
`module` and `name`; the worker imports the module and looks the name up), so what a worker runs
is the wrap; the driver, and xmine's code, are unchanged.

A wrap calls its function as usual until the test arms it (`first_call_killed`): the test then
listens on a Unix socket in `traps_dir`. The first call of the target in any worker (one only: it
claims the trap by creating a file with O_EXCL) connects to it and blocks reading it, inside the
call. The test's thread, blocked until that connection comes, learns the caller's process from the
kernel (SO_PEERCRED, not from what the worker says), checks that it is one of the cluster's own
processes, and SIGKILLs it: the call is then mid-run, by construction, not by luck. Ray re-runs
the task (restarts the actor and re-runs its call); there the claim is taken, and the call runs as
usual. If no call comes (the product no longer runs the target in a worker), the computation ends,
the test disarms, and nothing was killed: the test fails saying so. A caller that is not the
cluster's own is let go (the test closes the connection; the call goes on) and is not killed.

This module travels to the workers by value (`ray.cloudpickle.register_pickle_by_value`), so the
workers need not be able to import it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import select
import signal
import socket
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator


def _files(traps_dir: str | Path, target: str) -> tuple[Path, Path]:
    """(socket, claim) of `target`'s trap."""
    name = target.replace(":", "-")
    return Path(traps_dir) / f"{name}.sock", Path(traps_dir) / f"{name}.claimed"


def setup_hook(traps_dir: str, targets: list[str]) -> Callable[[], None]:
    """The `worker_process_setup_hook` of a cluster whose workers may be stopped in `targets`."""

    def install_ray_traps() -> None:
        for target in targets:
            _wrap(traps_dir, target)

    return install_ray_traps


def _wrap(traps_dir: str, target: str) -> None:
    module_name, qualname = target.split(":")
    owner = importlib.import_module(module_name)
    *path, name = qualname.split(".")  # "Class.method" wraps the method on its class
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    sock, claim = _files(traps_dir, target)

    @functools.wraps(original)
    def trapped(*args, **kwargs):
        if sock.exists():  # armed
            try:
                os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass  # an earlier call was stopped: this is a re-run, or another task
            else:
                _stop_here(sock, target)
        return original(*args, **kwargs)

    setattr(owner, name, trapped)


def _stop_here(sock: Path, target: str) -> None:
    """Tell the test that this process is in a call of `target`, and wait for it: killed here, or
    let go (the test closed its end, or was not listening any more)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(sock))
            s.sendall(f"a call of {target} in process {os.getpid()}".encode())
            s.recv(1)  # blocks until the test closes its end (or kills this process)
        except OSError:
            pass


@dataclass
class Trap:
    """What `first_call_killed` saw: the process killed in the call, or one it let go."""

    target: str
    killed: int | None = None
    said: str = ""
    not_ours: list[int] = field(default_factory=list)


@contextlib.contextmanager
def first_call_killed(traps_dir: str | Path, target: str, *, ours: Callable[[int], bool],
                      instead: Callable[[], None] | None = None) -> Iterator[Trap]:
    """Arm `target` (one of the cluster's `setup_hook` targets) for the block: the first call of it
    in a worker process, if `ours(pid)` says that process is the test's own, is SIGKILLed while it
    runs. Yields the `Trap`, whose `killed` is that process's id once the block has ended (None:
    no call came). `instead`: run while the call is held, in place of the kill; the call then goes
    on (`killed` stays None)."""
    sock, claim = _files(traps_dir, target)
    claim.unlink(missing_ok=True)
    sock.unlink(missing_ok=True)
    trap = Trap(target)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))  # the socket's file is what arms the wraps
    listener.listen()
    wake_r, wake_w = os.pipe()

    def kill_the_caller() -> None:
        ready, _, _ = select.select([listener, wake_r], [], [])  # blocks: a call, or the block's end
        if listener not in ready:
            return
        conn, _ = listener.accept()
        with conn:
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            pid = struct.unpack("3i", creds)[0]  # (pid, uid, gid) of the process that connected
            trap.said = conn.recv(4096).decode(errors="replace")
            if ours(pid) and instead is not None:
                instead()
            elif ours(pid):
                os.kill(pid, signal.SIGKILL)
                trap.killed = pid
            else:
                trap.not_ours.append(pid)
        # closing the connection lets a caller that was not killed go on

    thread = threading.Thread(target=kill_the_caller, name=f"trap {target}", daemon=True)
    thread.start()
    try:
        yield trap
    finally:
        os.write(wake_w, b"x")
        thread.join()
        listener.close()
        sock.unlink(missing_ok=True)  # disarmed
        claim.unlink(missing_ok=True)
        os.close(wake_r)
        os.close(wake_w)
