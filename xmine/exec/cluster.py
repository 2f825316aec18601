"""The Ray calls: connect to a cluster, run functions as tasks, collect their results.

`--ray` on embed, build-index, mine and train runs the same per-unit functions as one process
does; `xmine.exec.executor.OnRay` schedules them through this module. It imports `ray` inside its
functions, so the core works without the `ray` extra (`pip install 'xmine[ray]'`).

- `connect(address)`: `"auto"` joins the cluster this machine belongs to (`ray start` here, or
  `RAY_ADDRESS`) and otherwise starts a local one with this machine's CPUs; any other value is a
  cluster address (`host:6379` or `ray://host:10001`). A process that already called
  `ray.init` (a test session, a notebook) keeps its cluster.
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

import itertools
import logging
import os
import socket
from typing import Any, Callable, Iterable, Iterator

from xmine.errors import ConfigError, XmineError

log = logging.getLogger("xmine.exec.cluster")

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


def connect(address: str = "auto") -> dict[str, float]:
    """Join (or start) the Ray cluster named by `address`; return its resources.

    "auto": the cluster of `RAY_ADDRESS` or of a `ray start` on this machine if there is one,
    else a new local cluster with this machine's CPUs. Anything else: that cluster's address.
    """
    ray = require_ray()
    if not ray.is_initialized():
        kwargs: dict[str, Any] = dict(
            include_dashboard=False, logging_level=logging.WARNING, log_to_driver=True,
            configure_logging=True,
            # Workers inherit the driver's environment (XMINE_HOME, HF offline flags, ...).
            runtime_env={"env_vars": {k: os.environ[k] for k in _FORWARDED_ENV if k in os.environ}},
        )
        if address == "auto":
            named = os.environ.get("RAY_ADDRESS", "")
            if named and named != "auto":  # (else Ray retries a dead address for minutes)
                _check_reachable(named, what=f"--ray auto: RAY_ADDRESS={named}",
                                 remedy="unset RAY_ADDRESS to start a local cluster")
            try:
                ray.init(address="auto", **kwargs)
                log.info("ray: joined the running cluster")
            except ConnectionError:
                ray.init(**kwargs)
                log.info("ray: started a local cluster (no running cluster found)")
        else:
            _check_reachable(address)
            try:
                ray.init(address=address, **kwargs)
            except (ConnectionError, ValueError, RuntimeError) as e:
                raise ConfigError(f"--ray {address}: cannot join that Ray cluster ({e})") from None
    return cluster_resources()


def _check_reachable(address: str, timeout: float = 5.0, *, what: str | None = None,
                     remedy: str = "or use --ray auto") -> None:
    """A one-line error within seconds when nothing listens at HOST:PORT (Ray itself retries for
    minutes before it gives up). `what`: how the error names the address (default "--ray ADDRESS")."""
    host, sep, port = address.rpartition(":")
    if address.startswith("ray://") or not sep or not port.isdigit():
        return  # a Ray client address or a name Ray resolves itself
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise ConfigError(f"{what or f'--ray {address}'}: no Ray cluster answers there ({e.strerror or e}); start "
                          f"one with `ray start --head --port {port}` on {host}, {remedy}") from None


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
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=None if poll is None else poll_seconds)
        if not ready:
            poll()
            continue
        pending += itertools.islice(it, window - len(pending))
        yield ready[0], get(ready[0])


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


__all__ = ["TASK_RETRIES", "ReportRows", "RowCounter", "cluster_resources", "connect", "get", "largest_node_cpus",
           "remote", "require_ray", "run_tasks"]
