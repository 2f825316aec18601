"""The executor in this process (`xmine.exec.executor.LOCAL`): units in order, progress as they go.

Its Ray side (`OnRay`) runs the same units on a real cluster in tests/test_ray.py."""

from __future__ import annotations

import functools
import os
import pickle
import threading

import numpy as np
import pytest

from xmine.exec.executor import LOCAL, Recipe, ShardProgress, executor_for


def _count_rows(start: int, stop: int, *, on_rows=None):
    for lo in range(start, stop, 10):
        if on_rows is not None:
            on_rows(min(10, stop - lo))
    return start, stop


def test_local_runs_the_units_in_order_and_counts_each_row_once():
    units = [(0, 25), (25, 40), (40, 100)]
    with ShardProgress(shards=3, rows=100, desc="t") as bar:
        got = []
        for start, stop in LOCAL.map(_count_rows, units, progress=bar):
            got.append((start, stop))
            bar.done(stop - start)  # the unit reported its rows itself: not counted twice
        assert got == units
        assert (bar.bar.n, bar.shards_done) == (100, 3)


def test_done_counts_the_rows_a_unit_did_not_report():
    with ShardProgress(shards=2, rows=50, desc="t") as bar:
        bar.partial(10)
        bar.done(30)  # 20 more than reported
        bar.done(20)  # a unit run elsewhere reports nothing until it ends
        assert (bar.bar.n, bar.shards_done) == (50, 2)


def test_units_running_at_once_are_each_counted_once():
    with ShardProgress(shards=2, rows=11, desc="t") as bar:
        bar.partial(3)  # unit a, running
        bar.partial(4)  # unit b, running beside it
        bar.finishing(4)  # b finishes first: 4 of its 6 rows were reported
        bar.done(6)
        assert bar.bar.n == 9
        bar.finishing(3)
        bar.done(5)
        assert (bar.bar.n, bar.shards_done) == (11, 2)


class _Worker:
    made = 0

    def __init__(self, *, offset: int):
        _Worker.made += 1
        self.offset = offset

    def __call__(self, value: int, on_rows=None):
        return value + self.offset


def test_local_actors_build_their_worker_once():
    _Worker.made = 0
    pool = LOCAL.actor_pool(_Worker, {"offset": 5})
    assert list(pool.map([(1,), (2,), (3,)])) == [6, 7, 8]
    assert _Worker.made == 1


def _where(value: int, on_rows=None):
    return value, os.getpid(), threading.get_ident()


def test_no_address_runs_the_units_here_without_a_cluster(monkeypatch):
    # No --ray: never a connection; the units run in this process's own thread, in order, one at a
    # time; what many of them share is handed over as it is, not copied into a store.
    import xmine.exec.executor as executor_module

    monkeypatch.setattr(executor_module, "connect", lambda address: pytest.fail(f"connected to {address!r}"))
    executor = executor_for(None)
    here = (os.getpid(), threading.get_ident())
    assert list(executor.map(_where, [(1,), (2,), (3,)])) == [(v, *here) for v in (1, 2, 3)]
    assert executor.slots() == 1
    big = np.zeros(3)
    assert executor.share(big) is big


def test_a_recipe_gives_the_value_held_here_and_travels_as_the_recipe_only():
    recipe = Recipe(functools.partial(dict, made="by the worker"), made={"made": "by the driver"})
    assert recipe.get() == {"made": "by the driver"}  # a worker in this process: the driver's loaded model
    assert pickle.loads(pickle.dumps(recipe)).get() == {"made": "by the worker"}  # a Ray actor: made there


def test_the_pool_encoder_here_is_the_loaded_encoder_in_input_order(usem3):
    from xmine.encoders.pool import MIN_SLICE, PoolEncoder

    sentences = [f"Satz Nummer {i}." for i in range(2 * MIN_SLICE + 7)]
    pool = PoolEncoder(usem3, LOCAL)  # `train` without --ray: one worker, the encoder already loaded
    assert pool.workers == 1 and pool.fingerprint() == usem3.fingerprint()
    assert np.array_equal(pool.encode(sentences), usem3.encode(sentences))
    assert pool.encode([]).shape == (0, usem3.dim)


def test_resumed_units_count_on_the_bar_but_not_in_its_rate():
    """(a helper: resuming an interrupted embed showed "1082715.37 lines/s" while its finished shards
    were read past) A unit an earlier run finished moves the bar and the shard count; the rate is
    that of the rows done now."""
    import time

    from xmine.exec.executor import ShardProgress

    bar = ShardProgress(shards=None, rows=100_000, desc="t", enabled=True)
    for _ in range(5):
        bar.resumed(10_000)
    for _ in range(4):
        time.sleep(0.05)
        bar.partial(10)
        bar.done(10)
    shown = bar.bar.format_dict
    bar.close()
    assert (shown["n"], bar.shards_done) == (50_040, 9)
    assert shown["rate"] < 1_000, shown["rate"]  # ~200 rows/s; the resumed 50,000 at once gave ~10^6
