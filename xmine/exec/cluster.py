"""The Ray calls: connect to a cluster, run functions as tasks, collect their results.

`--ray` on embed, build-index, mine, score and train runs the same per-unit functions as one process
does; `xmine.exec.executor.OnRay` schedules them through this module. It imports `ray` inside its
functions, so the core works without the `ray` extra (`pip install 'xmine[ray]'`).

- `connect(address)`: `"auto"` joins the cluster this machine belongs to (`ray start` here, or
  `RAY_ADDRESS`) and otherwise starts a local one with this machine's CPUs; any other value is a
  cluster address (`host:6379` or `ray://host:10001`). A process that already called
  `ray.init` (a test session, a notebook, an earlier `--ray auto` call) keeps its cluster for
  "auto"; another address than that cluster's is refused (Ray joins one cluster a process), never
  dropped for the one the process is in.
- `run_tasks`: submit remote calls, yield their results as they finish (so the driver writes a
  checkpoint after each); a `RowCounter` takes the rows the tasks report as they go. Ray re-runs
  a task whose worker died (`max_retries`); an error raised by the task itself is not retried
  and reaches the driver as the original exception.
- `cluster_resources`: CPUs and GPUs the cluster offers, to size actor pools.

Workers must see the same paths as the driver (a shared file system, as on a SLURM cluster or a
single machine): tasks read their inputs and write their outputs by path, so only small
descriptions and results travel through Ray's object store.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import socket
import threading
import time
from typing import Any, Callable, Iterable, Iterator

from xmine.errors import ConfigError, XmineError

log = logging.getLogger("xmine.exec.cluster")
#: the address this process joined a Ray cluster by through `connect` ("address"), where it did
_joined: dict[str, str] = {}

#: A worker that dies (killed, out of memory, node lost) has its task re-run this many times.
TASK_RETRIES = 3
#: What the workers take from the driver's environment.
_FORWARDED_ENV = ("XMINE_HOME", "XMINE_DATA", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM",
                  "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "HF_HOME")


def require_ray():
    """The `ray` module, or a one-line error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray needs Ray: pip install 'xmine[ray]' (or run scripts/setup.sh)") from None
    return ray


class _TokenAuthNotice(logging.Filter):
    """Leaves out Ray's notice that a cluster it starts uses token authentication, its safe default
    with nothing to act on, printed before every `--ray auto` run's own lines; its warning that a
    cluster runs without it stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Token authentication is enabled")


_RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


def connect(address: str = "auto") -> dict[str, float]:
    """Join (or start) the Ray cluster named by `address`; return its resources.

    "auto": the cluster of `RAY_ADDRESS` or of a `ray start` on this machine if there is one,
    else a new local cluster with this machine's CPUs. Anything else: that cluster's address.
    """
    if not isinstance(address, str) or not address.strip():
        raise ConfigError(f"ray must be 'auto' or a Ray cluster's address (host:port, ray://host:port), "
                          f"not {address!r}")
    ray = require_ray()
    auth_log = logging.getLogger(_RAY_AUTH_LOGGER)
    if not any(isinstance(f, _TokenAuthNotice) for f in auth_log.filters):
        auth_log.addFilter(_TokenAuthNotice())
    if ray.is_initialized():
        _check_same_cluster(ray, address)
    else:
        with _own_sigterm_handler():
            _init(ray, address)
    return cluster_resources()


@contextlib.contextmanager
def _own_sigterm_handler():
    """The process's SIGTERM handler as it was before `ray.init`, which installs Ray's own (in Python
    and in its C++ core: a stack dump, then death by the signal: exit 15, no clean-up, no line of
    xmine's; once, with the driver in a blocking read, a loop of SIGSEGVs at 100% CPU that never
    ended). xmine's handler turns SIGTERM into a clean stop (xmine.cli: exit 143, finished work
    kept); a program's own is its own. Only the main thread may set a handler, and only there was
    one set."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)  # (Python's view was never changed: set again at the C level)


def _init(ray, address: str) -> None:
    """`ray.init` for `connect`: the cluster named by `address`, or a new local one."""
    _joined.clear()
    kwargs: dict[str, Any] = dict(
        include_dashboard=False, logging_level=logging.WARNING, log_to_driver=True,
        configure_logging=True,
        # Workers inherit the driver's environment (XMINE_HOME, HF offline flags, ...).
        runtime_env={"env_vars": {k: os.environ[k] for k in _FORWARDED_ENV if k in os.environ}},
    )
    if address == "auto":
        named = os.environ.get("RAY_ADDRESS", "")
        if named and named != "auto":  # the user's address: joined or refused, never swapped for a local cluster
            what = f"--ray auto: RAY_ADDRESS={named}"
            _check_reachable(named, what=what, remedy="unset RAY_ADDRESS to start a local cluster")
            _join(ray, "auto", kwargs, what=what)
            log.info("ray: joined the cluster at RAY_ADDRESS")
            return
        try:
            ray.init(address="auto", **kwargs)
            log.info("ray: joined the running cluster")
        except ConnectionError:
            ray.init(**kwargs)
            log.info("ray: started a local cluster (no running cluster found)")
    else:
        _check_reachable(address)
        _join(ray, address, kwargs, what=f"--ray {address}")
        _joined["address"] = address


def _join(ray, address: str, kwargs: dict, *, what: str) -> None:
    """`ray.init(address)`, or a ConfigError naming `what` (Ray says only "Failed to connect", also
    where the cluster asked for a token the driver did not send)."""
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, ValueError, RuntimeError) as e:
        hint = ("; a cluster that Ray >= 2.60's `ray start` made asks for a token: set RAY_AUTH_MODE=token here, "
                "with the cluster's token in ~/.ray/auth_token or RAY_AUTH_TOKEN (docs/scaling.md)"
                if not os.environ.get("RAY_AUTH_MODE") else "")
        raise ConfigError(f"{what}: cannot join that Ray cluster ({e}){hint}") from None


def _check_same_cluster(ray, address: str) -> None:
    """A ConfigError where the process is in a Ray cluster (`ray.init` called before) and `address`
    names another: Ray cannot join a second one, and running in the first would leave the work where
    it was not asked to run, with a record naming the address asked."""
    if address == "auto" or address == _joined.get("address"):
        return
    try:
        current = ray.get_runtime_context().gcs_address
    except Exception:  # (a Ray client connection has no GCS address of its own)
        current = _joined.get("address")
    if current and _host_port(address) == _host_port(current):
        return
    raise ConfigError(f"--ray {address}: this process is already in the Ray cluster at {current or 'another address'} "
                      "(ray.init was called before, here or by an earlier --ray); ray.shutdown() first to run on "
                      "another cluster, or pass that cluster's address or 'auto'")


def _host_port(address: str) -> tuple[str, str]:
    """(IP address, port) of HOST:PORT, the host resolved where it can be, to compare two spellings."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        host = socket.gethostbyname(host)
    except (OSError, UnicodeError):
        pass
    return host, port


#: What an HTTP/2 client sends first (RFC 9113, 3.4), then an empty SETTINGS frame. A Ray cluster's
#: address is its GCS, a gRPC server, which answers with a SETTINGS frame of its own; the dashboard
#: (HTTP/1, port 8265) or another program answers otherwise, and Ray would retry it for minutes.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_HTTP2_SETTINGS = 4  # a frame's type, its fourth byte


def _check_reachable(address: str, timeout: float = 5.0, *, what: str | None = None,
                     remedy: str = "or use --ray auto") -> None:
    """A one-line error within seconds when nothing listens at HOST:PORT, or what answers there is
    not a Ray cluster's GCS (Ray itself retries for minutes before it gives up). `what`: how the
    error names the address (default "--ray ADDRESS")."""
    host, sep, port = address.rpartition(":")
    if address.startswith("ray://") or not sep or not port.isdigit():
        return  # a Ray client address or a name Ray resolves itself
    what = what or f"--ray {address}"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as conn:
            answer = _first_answer(conn)
    except OSError as e:
        raise ConfigError(f"{what}: no Ray cluster answers there ({e.strerror or e}); start "
                          f"one with `ray start --head --port {port}` on {host}, {remedy}") from None
    if answer is not None and not (len(answer) >= 4 and answer[3] == _HTTP2_SETTINGS):
        said = ("closed the connection" if not answer else
                "answered as an HTTP/1 server" if answer[:5] in (b"HTTP/", b"<!DOC", b"<html") else
                "answered in another protocol")
        raise ConfigError(f"{what}: what listens there is not a Ray cluster ({said}); a cluster's address is "
                          f"its head node's GCS port (`ray start --head --port PORT`, 6379 by default), not "
                          f"the dashboard's (8265)")


def _first_answer(conn: socket.socket) -> bytes | None:
    """The first bytes the server at `conn` sends back to the HTTP/2 preface (b"": it closed the
    connection), or None where it cannot be asked (TLS, which Ray may use: RAY_USE_TLS) or said
    nothing in time (left to Ray)."""
    if os.environ.get("RAY_USE_TLS", "").lower() in ("1", "true"):
        return None
    answer = b""
    try:
        conn.sendall(_HTTP2_PREFACE)
        while len(answer) < 5 and (more := conn.recv(16)):
            answer += more
    except socket.timeout:
        return answer or None
    except ConnectionError:
        pass
    return answer


def cluster_resources() -> dict[str, float]:
    """{"CPU": n, "GPU": g} of the connected cluster (0 when absent)."""
    ray = require_ray()
    res = ray.cluster_resources()
    return {"CPU": float(res.get("CPU", 0)), "GPU": float(res.get("GPU", 0))}


def largest_node_cpus() -> int:
    """CPUs of the cluster's largest live node (what one many-threaded task can have)."""
    ray = require_ray()
    cpus = [int(node["Resources"].get("CPU", 0)) for node in ray.nodes() if node.get("Alive")]
    return max([c for c in cpus if c > 0], default=1)


def remote(fn: Callable, **options):
    """`fn` as a Ray remote function whose tasks are re-run when their worker dies."""
    ray = require_ray()
    return ray.remote(max_retries=TASK_RETRIES, **options)(fn)


def run_tasks(refs: Iterable[Any], *, window: int | None = None, poll: Callable[[], None] | None = None,
              poll_seconds: float = 0.5) -> Iterator[tuple[Any, Any]]:
    """Yield (ref, result) of Ray object refs as they finish (any order); `poll()` is called about
    every `poll_seconds` while none does.

    `refs` may be a lazy iterable: at most `window` (default: twice the cluster's CPUs) are in
    flight at once, so a million-shard job does not submit a million tasks up front and the
    driver's memory stays bounded by the window.
    """
    ray = require_ray()
    if window is None:
        window = max(2, 2 * int(cluster_resources()["CPU"] or 1))
    it = iter(refs)
    pending = list(itertools.islice(it, window))
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=None if poll is None else poll_seconds)
            if not ready:
                poll()
                continue
            pending += itertools.islice(it, window - len(pending))
            yield ready[0], get(ready[0])
    except BaseException:  # stopped (Ctrl-C, a task's error) or left early
        cancel_tasks(pending)
        raise


def cancel_tasks(refs: list, *, timeout: float = 10.0) -> None:
    """Cancel the tasks of `refs` and take their outcomes. A task left running when its run was
    stopped fails later (the run's `RowCounter` is gone), and Ray prints each failure no one took
    as an "Unhandled error" with its traceback, after xmine's one-line message."""
    ray = require_ray()
    deadline, left = time.monotonic() + timeout, list(refs)
    while left:
        # Cancelled again until each has ended: a cancel that meets a task being handed to its
        # worker, before it runs, is lost (ray-project/ray#24359), and the task runs on.
        for ref in left:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        wait = min(1.0, deadline - time.monotonic())
        if wait <= 0:  # (said: each may still finish, or fail and be printed by Ray)
            log.warning(f"{len(left)} Ray task(s) of the stopped run did not stop within {timeout:.0f} s of being "
                        "cancelled")
            break
        try:
            _, left = ray.wait(left, num_returns=len(left), timeout=wait)
        except Exception:  # (the cluster gone: nothing left to stop)
            break
    for ref in refs:
        with contextlib.suppress(Exception):
            ray.get(ref, timeout=0)


class RowCounter:
    """A Ray actor: the rows running tasks reported, by task, until the driver takes them."""

    def __init__(self):
        self.rows: dict[int, int] = {}

    def add(self, task: int, rows: int) -> None:
        self.rows[task] = self.rows.get(task, 0) + rows

    def take(self) -> dict[int, int]:
        rows, self.rows = self.rows, {}
        return rows


class ReportRows:
    """A task's `on_rows`: its rows added to the driver's `RowCounter`, each report acknowledged
    before the task goes on (so every report is counted before its task's result is)."""

    def __init__(self, counter, task: int):
        self.counter, self.task = counter, task

    def __call__(self, rows: int) -> None:
        get(self.counter.add.remote(self.task, rows))


def get(ref: Any) -> Any:
    """`ray.get`, with an xmine error raised in a task re-raised as itself (one line, exit 2)."""
    ray = require_ray()
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        if isinstance(e.cause, XmineError):
            raise e.cause from None
        raise


__all__ = ["TASK_RETRIES", "ReportRows", "RowCounter", "cancel_tasks", "cluster_resources", "connect", "get",
           "largest_node_cpus", "remote", "require_ray", "run_tasks"]
