"""Where a step's work units run: in this process, or as tasks on a Ray cluster.

A step (a tile of the exact product, rows added to an index piece, a run of query blocks
searched in one shard, a shard of a corpus embedded) is a plain function over one work unit. The
step lists its units, leaves out those its checkpoint already holds, hands the rest to an
executor and merges each result as it arrives, checkpointing it. Results may arrive in any order:
every merge is order-independent (`xmine.topk.merge_topk` keeps one canonical order; shards are
recorded by index). So the same step gives the same bytes here and on a cluster, as in Ray Data
and autofaiss, where the engine only schedules. This module is the only one that knows where
units run: a step asks it only how to size them (`slots`, `unit_threads`, `gpus`,
`model_actors`); docs/development.md draws the shape.

- `LOCAL`: the units one after another, in order, in this process. A unit uses the machine's
  threads itself (BLAS, FAISS's OpenMP, torch), and reports its rows as it goes (`on_rows`).
- `OnRay()`: each unit a Ray task of `cpus` CPUs (or one GPU), at most a window in flight
  (`xmine.exec.cluster.run_tasks`), or a call on a pool of actors that keep a loaded model
  (`actor_pool`); a task whose worker died is re-run, a dead actor restarted. Connect first
  (`xmine.exec.cluster.connect`).

A worker gets what its units use (a loaded model) one way wherever it runs: from a `Recipe`.

A unit function takes its unit's arguments and a keyword `on_rows` (a callback of a row count,
or None): `LOCAL` passes the progress bar's, Ray tasks none (their rows count when they finish).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from xmine.exec.cluster import (ReportRows, RowCounter, cluster_resources, connect, get, largest_node_cpus, remote,
                                run_tasks)


class ShardProgress:
    """Progress of a step: rows (or pairs, queries) with rate and ETA, and "shards d/n" beside it.

    `partial(rows)` as a unit goes (`on_rows`, here or from a Ray task), `done(rows)` when a unit is
    finished: the bar then counts what the unit did not report itself."""

    def __init__(self, *, shards: int | None, rows: int, desc: str, unit: str = " sentences", enabled: bool = True,
                 shards_done: int = 0, rows_done: int = 0):
        """`shards`: how many units there are, None when a stream's count is not known up front."""
        from tqdm.auto import tqdm

        self.shards, self.shards_done, self._partial, self._finishing = shards, shards_done, 0, None
        self.start = time.perf_counter()
        self.bar = tqdm(total=rows, initial=rows_done, desc=desc, unit=unit, disable=not enabled,
                        dynamic_ncols=True, smoothing=0.1)
        self.bar.set_postfix_str(self._postfix())

    def _postfix(self) -> str:
        return f"shards {self.shards_done}" + (f"/{self.shards}" if self.shards is not None else "")

    def partial(self, rows: int) -> None:
        self._partial += rows
        self.bar.update(rows)

    def finishing(self, reported: int) -> None:
        """The next `done` is of a unit that reported `reported` rows (where several run at once;
        else a finished unit reported every partial row so far)."""
        self._finishing = reported

    def done(self, rows: int) -> None:
        reported = self._partial if self._finishing is None else self._finishing
        self.shards_done += 1
        self.bar.update(max(0, rows - reported))
        self._partial, self._finishing = self._partial - reported, None
        self.bar.set_postfix_str(self._postfix())

    def resumed(self, rows: int) -> None:
        """A unit an earlier run finished, found again as the input is read: counted, and left out
        of the rate (was: its rows at once, a rate of a million lines a second on resuming)."""
        self.shards_done += 1
        bar = self.bar
        bar.n += rows
        if not bar.disable:  # (a disabled bar keeps no rate)
            bar.last_print_n += rows  # (what tqdm's rate measures from)
            bar.initial += rows
            bar.set_postfix_str(self._postfix())

    def complete(self) -> None:
        """Move the bar to its total (rows no unit covers, such as trailing empty lines)."""
        self.bar.update(max(0, self.bar.total - self.bar.n))

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> "ShardProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Executor:
    """Runs a step's units (see the module doc). `LOCAL` is this process; `OnRay` a cluster."""

    name = "local"

    def share(self, value: Any) -> Any:
        """What the units receive for a large argument passed to many of them."""
        return value

    def gpus(self) -> int | None:
        """GPUs the units can use (None here: the step counts this machine's own)."""
        return None

    def slots(self, *, gpu: bool = False) -> int:
        """Units that run at once (one here, using the machine's threads)."""
        return 1

    def unit_threads(self, cpus: int) -> int | None:
        """Threads a unit given `cpus` CPUs may use (None here: the machine's)."""
        return None

    def node_cpus(self) -> int | None:
        """Threads of the largest machine, for a unit that must use as many as one process there
        would (None here: the unit uses this machine's own count)."""
        return None

    def model_actors(self, threads: int, *, gpu: bool = True) -> tuple[int, bool]:
        """(actors, on GPUs) for a pool of workers holding a model: one per GPU when there are
        GPUs and the model can use one (`gpu`), else one per `threads` CPUs (one here, using the
        machine's threads itself)."""
        return 1, False

    def call(self, fn: Callable, *args, cpus: int | None = None, gpus: int = 0) -> Any:
        """`fn(*args)` as one unit; `cpus`: the threads it may use (None: all of this machine's)."""
        return fn(*args)

    def map(self, fn: Callable, units: Iterable[tuple], *, cpus: int = 1, gpus: int = 0,
            progress: ShardProgress | None = None) -> Iterator[Any]:
        """`fn(*unit)` for every unit, results as they finish."""
        return LocalPool(fn).map(units, progress=progress)

    def actor_pool(self, make: Callable, make_kwargs: dict, *, actors: int = 1, cpus: int = 1,
                   gpus: int = 0) -> "LocalPool":
        """Workers that keep a loaded model for many calls: `make(**make_kwargs)` built once per
        actor (its model from a `Recipe` among `make_kwargs`). `pool.map(units)` gives
        `worker(*unit)` for every unit, results as they finish; `pool.close()` ends it."""
        return LocalPool(make(**make_kwargs))


class Recipe:
    """How a worker gets a value its units use (a loaded encoder, a projection), one way wherever the
    executor runs it: `make()`, once per worker. It travels to another process (a Ray actor) as the
    recipe only; the process that holds the value already (`made`: the driver's loaded encoder) uses
    it, an optimisation (and the only way for an encoder `make` cannot load, which then runs here only)."""

    def __init__(self, make: Callable[[], Any], *, made: Any = None):
        self.make, self._made = make, made

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_made": None}

    def get(self) -> Any:
        if self._made is None:
            self._made = self.make()
        return self._made


class LocalPool:
    """One worker in this process, the units one after another."""

    def __init__(self, worker: Callable):
        self.worker = worker

    def map(self, units: Iterable[tuple], *, progress: ShardProgress | None = None) -> Iterator[Any]:
        on_rows = progress.partial if progress is not None else None
        return (self.worker(*unit, on_rows=on_rows) for unit in units)

    def close(self) -> None:
        pass


LOCAL = Executor()


class OnRay(Executor):
    """The units as tasks on the connected Ray cluster (`xmine.exec.cluster.connect`)."""

    name = "ray"

    def share(self, value: Any) -> Any:
        import ray

        if isinstance(value, np.ndarray):  # put once (a memory map as its rows); tasks read the object store
            value = np.ascontiguousarray(value)
        return ray.put(value)  # a row view over files pickles as its paths (xmine.store.rows)

    def gpus(self) -> int:
        return int(cluster_resources()["GPU"])

    def slots(self, *, gpu: bool = False) -> int:
        res = cluster_resources()
        return max(1, int(res["GPU"] if gpu else res["CPU"]))

    def unit_threads(self, cpus: int) -> int | None:
        return cpus

    def model_actors(self, threads: int, *, gpu: bool = True) -> tuple[int, bool]:
        gpus = self.gpus() if gpu else 0
        return (gpus, True) if gpus >= 1 else (max(1, self.slots() // threads), False)

    def node_cpus(self) -> int | None:
        return largest_node_cpus()

    def call(self, fn: Callable, *args, cpus: int | None = None, gpus: int = 0) -> Any:
        return get(remote(fn, num_cpus=cpus or self.node_cpus(), num_gpus=gpus).remote(*args))

    def map(self, fn: Callable, units: Iterable[tuple], *, cpus: int = 1, gpus: int = 0,
            progress: ShardProgress | None = None) -> Iterator[Any]:
        """Each unit a task; with `progress`, the rows the tasks report (`on_rows`) reach the bar
        as they go, gathered by a `RowCounter` actor, and each is counted once."""
        import ray

        task = remote(fn, num_cpus=cpus, num_gpus=gpus)
        if progress is None:
            progress = ShardProgress(shards=None, rows=0, desc="", enabled=False)  # (counts, never shown)
        counter = ray.remote(num_cpus=0)(RowCounter).remote()
        reported, task_of = {}, {}

        def submit():
            for t, unit in enumerate(units):
                ref = task.remote(*unit, on_rows=ReportRows(counter, t))
                reported[t], task_of[ref] = 0, t
                yield ref

        def take():
            for t, rows in get(counter.take.remote()).items():
                if t in reported:  # (a task re-run after its worker died reports its rows again)
                    reported[t] += rows
                    progress.partial(rows)

        try:
            for ref, result in run_tasks(submit(), poll=take):
                take()
                progress.finishing(reported.pop(task_of.pop(ref)))
                yield result
        finally:
            ray.kill(counter)

    def actor_pool(self, make: Callable, make_kwargs: dict, *, actors: int = 1, cpus: int = 1,
                   gpus: int = 0) -> "RayPool":
        return RayPool(make, make_kwargs, actors=actors, cpus=cpus, gpus=gpus)


class RayPool(LocalPool):
    """`actors` Ray actors, each holding one `make(**make_kwargs)` worker for its whole life; an
    actor that dies is restarted (its worker made again) and its unit re-run."""

    def __init__(self, make: Callable, make_kwargs: dict, *, actors: int, cpus: int, gpus: int):
        import ray

        actor = ray.remote(num_cpus=cpus, num_gpus=gpus, max_restarts=-1, max_task_retries=-1)(PoolActor)
        self.actors = [actor.remote(make, make_kwargs) for _ in range(max(1, actors))]
        self._running: dict = {}  # (the units `map` gave the actors, by ref: `close` cancels those left)

    def map(self, units: Iterable[tuple], *, progress: ShardProgress | None = None) -> Iterator[Any]:
        """Each actor given one unit at a time; `units` is read lazily (at most one unit per actor
        is held), so a streamed corpus is never held whole."""
        import ray

        idle, todo = list(self.actors), iter(units)
        running = self._running = {}
        while True:
            while idle and (unit := next(todo, None)) is not None:
                a = idle.pop()
                running[a.run.remote(unit)] = a
            if not running:
                return
            ready, _ = ray.wait(list(running), num_returns=1)
            idle.append(running.pop(ready[0]))
            yield get(ready[0])

    def close(self) -> None:
        """The actors killed, their units still running cancelled first: an actor's unit cannot be
        stopped, but a cancelled one is not re-run on the dead actor (was: Ray's "(raylet) Task
        PoolActor.run failed ... will be retried" after the run's own last line)."""
        import ray

        left = list(self._running)
        for ref in left:
            with contextlib.suppress(Exception):
                ray.cancel(ref)
        for a in self.actors:
            ray.kill(a)
        self.actors, self._running = [], {}
        for ref in left:  # (their outcomes taken: an error no one takes is printed by Ray)
            with contextlib.suppress(Exception):
                ray.get(ref, timeout=10)


class PoolActor:
    """A Ray actor holding one `make(**make_kwargs)` worker for its whole life."""

    def __init__(self, make: Callable, make_kwargs: dict):
        self.worker = make(**make_kwargs)

    def run(self, unit: tuple) -> Any:
        return self.worker(*unit)


def executor_for(ray_address: str | None) -> Executor:
    """`LOCAL`, or (`--ray ADDRESS`) the Ray cluster there, connected."""
    if ray_address is None:
        return LOCAL
    connect(ray_address)
    return OnRay()


__all__ = ["Executor", "LOCAL", "OnRay", "Recipe", "ShardProgress", "executor_for"]
