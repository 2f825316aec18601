"""Small-scale measurements that docs/scaling.md multiplies out to 1B sentences per side.

On n seeded 384-d vectors (mining_speed's data), one process:
- IVF-PQ index (`IVF{nlist},PQ64`, stopes' code size): training seconds, adding seconds per
  million rows, bytes per vector on disk (codes + ids + lists);
- search at nprobe = 8, 32, 128: queries per second and codes scanned per second (the
  quantity that scales to 1B: codes scanned per query = nprobe * N / nlist);
- the exact blocked product: pairs per second of one 1024 x 4096 block product in one thread;
- the one-to-one step (`select_pairs`, max retrieval) on 2n candidates: seconds and peak memory
  above the inputs (VmHWM, in a fresh subprocess).
Writes benchmarks/results/scaling_inputs.json.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import click
import numpy as np

from measure import child_json, lab_command, rss_mb, write_speed_result
from xmine.benchmarks.common import machine, results_dir


def one_to_one_step(n: int) -> dict:
    """select_pairs (k=4, ratio, max) on n x n random kNN lists; run in a subprocess for VmHWM."""
    from xmine.mining.select import MiningConfig, select_pairs

    rng = np.random.default_rng(0)
    k = 4
    fs = np.sort(rng.random((n, k), dtype=np.float32), axis=1)[:, ::-1].copy()
    bs = np.sort(rng.random((n, k), dtype=np.float32), axis=1)[:, ::-1].copy()
    fi = rng.integers(0, n, (n, k))
    bi = rng.integers(0, n, (n, k))
    base = rss_mb(peak=False)
    t0 = time.perf_counter()
    mined = select_pairs(fs, fi, bs, bi, config=MiningConfig())
    return {"n": n, "candidates": 2 * n, "seconds": round(time.perf_counter() - t0, 2), "pairs": len(mined),
            "peak_mb_above_inputs": round(rss_mb() - base, 1)}


@click.command("scaling-inputs")
@click.option("--n", type=int, default=100_000, show_default=True, help="Vectors per side.")
@click.option("--nlist", type=int, default=1024, show_default=True, help="IVF lists of the index.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Result JSON (default: benchmarks/results/scaling_inputs.json).")
@click.option("--one-to-one", type=int, default=None, hidden=True)  # the subprocess that measures select_pairs
def command(n, nlist, out, one_to_one) -> None:
    """IVF-PQ, exact-block and one-to-one rates that docs/scaling.md multiplies out to 1B rows."""
    if one_to_one:
        print(json.dumps(one_to_one_step(one_to_one)))
        return
    args = SimpleNamespace(n=n, nlist=nlist, out=out or results_dir() / "scaling_inputs.json")

    import faiss
    from threadpoolctl import threadpool_info, threadpool_limits

    from mining_speed import make_data

    x, y = make_data(args.n, 384, seed=0)
    result: dict = {"n": args.n, "dim": 384, "blas": [{k: p.get(k) for k in ("internal_api", "architecture")}
                                                      for p in threadpool_info()]}
    faiss.omp_set_num_threads(1)
    with threadpool_limits(limits=1):
        index = faiss.index_factory(384, f"IVF{args.nlist},PQ64", faiss.METRIC_INNER_PRODUCT)
        train = x[np.random.default_rng(0).choice(args.n, min(args.n, max(64 * args.nlist, 256 * 39)), replace=False)]
        t0 = time.perf_counter()
        index.train(train)
        t_train = time.perf_counter() - t0
        t0 = time.perf_counter()
        index.add(x)
        t_add = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as d:
            faiss.write_index(index, f"{d}/ix.faiss")
            size = Path(f"{d}/ix.faiss").stat().st_size
        result["ivfpq"] = {"factory": f"IVF{args.nlist},PQ64", "train_vectors": len(train),
                           "train_s_one_thread": round(t_train, 1),
                           "add_s_per_million_one_thread": round(t_add / args.n * 1e6, 1),
                           "file_bytes_per_vector": round(size / args.n, 2)}
        q = y[:5000]
        search = []
        for nprobe in (8, 32, 128):
            index.nprobe = nprobe
            t0 = time.perf_counter()
            index.search(q, 4)
            dt = time.perf_counter() - t0
            scanned = nprobe * args.n / args.nlist
            search.append({"nprobe": nprobe, "queries_per_s_one_thread": round(len(q) / dt, 1),
                           "codes_scanned_per_query": round(scanned), "codes_per_s_one_thread": round(scanned * len(q) / dt)})
        result["ivfpq_search"] = search
        xb, yb = x[:1024].copy(), y[:4096].copy()
        out = np.empty((1024, 4096), np.float32)
        np.matmul(xb, yb.T, out=out)
        t0 = time.perf_counter()
        reps = 20
        for _ in range(reps):
            np.matmul(xb, yb.T, out=out)
        dt = (time.perf_counter() - t0) / reps
        result["exact_block"] = {"block": [1024, 4096], "pairs_per_s_one_thread": round(1024 * 4096 / dt),
                                 "gflops_one_thread": round(2 * 1024 * 4096 * 384 / dt / 1e9, 1)}
    result["one_to_one"] = [child_json(lab_command("scaling-inputs", "--one-to-one", n)) for n in (args.n, 4 * args.n)]
    from xmine.artefacts.directory import provenance

    result = {"machine": machine(), **result, "provenance": provenance(benchmark="scaling_inputs", n=args.n)}
    write_speed_result(args.out, result, benchmark="scaling_inputs")
    print(json.dumps(result, indent=1))

