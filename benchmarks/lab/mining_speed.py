"""Exact mining speed: xmine vs one plain matrix product vs the straightforward (LASER-style) way.

Two sets of n L2-normalised float32 embeddings (seeded): a fraction of y are noisy copies of
shuffled x rows (the "translations"), the rest random. Each method runs in a fresh subprocess
so its peak memory (VmHWM; BLAS buffers included) is its own:
- xmine: `mine_embeddings` (k=4, ratio, max) with the default product (`auto`: bf16 on CPUs with
  avx512_bf16/AMX): one blocked product finds both directions' candidates, which are rescored
  exactly (mining/knn_product.py, mining/products.py);
- xmine-fp32: the same with the float32 product (the reference path);
- matmul: one plain numpy float32 product X @ Y.T, computed in blocks (nothing kept): the floor
  of any exact search in float32;
- straightforward: what LASER's mine_bitexts.py does: faiss IndexFlatIP search in each direction
  (two products), margin scores in a Python loop over candidates, greedy max in a Python loop.
Asserted: xmine and xmine-fp32 give the same pairs and scores, byte for byte; the straightforward
way mines the same pairs (its scores are faiss' float32 sums). Targets: xmine <= 0.7x the time
of the product, >= 3x faster than the straightforward way.

The BLAS kernel matters for numpy's product (OpenBLAS picks one per CPU; OPENBLAS_CORETYPE forces
one): the result JSON records it (threadpoolctl) and the OPENBLAS_* environment, and is named
after the kernel (`mining_speed-<kernel>.json`) unless --out is given.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import click
import numpy as np

from measure import blas_info, child_json, lab_command, rss_mb, write_speed_result
from xmine.benchmarks.common import results_dir

METHODS = ("xmine", "xmine-fp32", "matmul", "straightforward")
ENV_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")


def make_data(n: int, dim: int, *, seed: int = 0, parallel_fraction: float = 0.5, noise: float = 0.6):
    """x random; y[perm[i]] = normalise(x[i] + noise * g) for the first fraction of rows, else random."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = rng.standard_normal((n, dim), dtype=np.float32)
    n_par = int(n * parallel_fraction)
    y[:n_par] = x[:n_par] + noise * y[:n_par] / np.float32(np.sqrt(dim))  # cos(x, y) ~ 1/sqrt(1+noise^2)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    perm = rng.permutation(n)
    y = y[perm]  # x[i] is the translation of y[j] where perm[j] == i, for i < n_par
    return np.ascontiguousarray(x), np.ascontiguousarray(y)


def _run_xmine(x, y, product: str = "auto"):
    from xmine.mining import MiningConfig, mine_embeddings

    m = mine_embeddings(x, y, config=MiningConfig(k=4, margin="ratio", retrieval="max", product=product))
    return m.src_idx, m.tgt_idx, m.score


def _run_matmul(x, y, block_rows: int = 4096, block_cols: int = 16384):
    out = np.empty((block_rows, block_cols), dtype=np.float32)
    for i in range(0, len(x), block_rows):
        xb = x[i : i + block_rows]
        for j in range(0, len(y), block_cols):
            yb = y[j : j + block_cols]
            np.matmul(xb, yb.T, out=out[: len(xb), : len(yb)])


def _run_straightforward(x, y, k: int = 4):
    """LASER source/mine_bitexts.py (knn with faiss IndexFlatIP, score_candidates loops, max mode)."""
    import faiss

    def knn(a, b, k):
        idx = faiss.IndexFlatIP(b.shape[1])
        idx.add(b)
        return idx.search(a, k)

    x2y_sim, x2y_ind = knn(x, y, min(len(y), k))
    x2y_mean = x2y_sim.mean(axis=1)
    y2x_sim, y2x_ind = knn(y, x, min(len(x), k))
    y2x_mean = y2x_sim.mean(axis=1)

    def score_candidates(a, b, cand, fwd_mean, bwd_mean):
        scores = np.zeros(cand.shape)
        for i in range(scores.shape[0]):
            for j in range(scores.shape[1]):
                c = cand[i, j]
                scores[i, j] = a[i].dot(b[c]) / ((fwd_mean[i] + bwd_mean[c]) / 2)
        return scores

    fwd_scores = score_candidates(x, y, x2y_ind, x2y_mean, y2x_mean)
    bwd_scores = score_candidates(y, x, y2x_ind, y2x_mean, x2y_mean)
    fwd_best = x2y_ind[np.arange(len(x)), fwd_scores.argmax(axis=1)]
    bwd_best = y2x_ind[np.arange(len(y)), bwd_scores.argmax(axis=1)]
    indices = np.stack((np.concatenate((np.arange(len(x)), bwd_best)),
                        np.concatenate((fwd_best, np.arange(len(y))))), axis=1)
    scores = np.concatenate((fwd_scores.max(axis=1), bwd_scores.max(axis=1)))
    seen_src, seen_trg, src, tgt, sc = set(), set(), [], [], []
    for i in np.argsort(-scores):
        s, t = indices[i]
        if s not in seen_src and t not in seen_trg:
            seen_src.add(s)
            seen_trg.add(t)
            src.append(s)
            tgt.append(t)
            sc.append(scores[i])
    return np.asarray(src), np.asarray(tgt), np.asarray(sc)


def worker(method: str, data_dir: str, pairs_out: str | None) -> dict:
    # Loaded, not generated here: generating makes temporaries larger than what a method adds, and
    # the peak only rises, so "over the data" would read 0 for any method that needs less.
    x, y = np.load(os.path.join(data_dir, "x.npy")), np.load(os.path.join(data_dir, "y.npy"))
    if method.startswith("xmine"):  # imports are not the search: torch takes seconds to load cold
        import xmine.mining.select  # noqa: F401
        from xmine.mining.products import resolve_product

        resolve_product("auto")
    base = rss_mb()
    t0 = time.perf_counter()
    run = {"xmine": _run_xmine, "xmine-fp32": lambda a, b: _run_xmine(a, b, "fp32"), "matmul": _run_matmul,
           "straightforward": _run_straightforward}[method]
    result = run(x, y)
    seconds = time.perf_counter() - t0
    peak = rss_mb()
    if pairs_out and result is not None:
        np.savez(pairs_out, src=result[0], tgt=result[1], score=result[2])
    out = {"method": method, "seconds": round(seconds, 3), "peak_rss_mb": round(peak, 1),
           "peak_rss_over_data_mb": round(peak - base, 1), "pairs": None if result is None else int(len(result[0]))}
    if method == "matmul":
        out["blas"] = blas_info()
    if method == "xmine":
        from xmine.mining.products import resolve_product

        out["product"] = resolve_product("auto")
    return out


@click.command("mining-speed")
@click.option("--n", type=int, default=100_000, show_default=True, help="Sentences per side.")
@click.option("--dim", type=int, default=384, show_default=True, help="Embedding dimension (me5-small's).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Result JSON (default: benchmarks/results/mining_speed-<BLAS kernel>.json).")
@click.option("--worker", type=click.Choice(METHODS), hidden=True)
@click.option("--pairs-out", hidden=True)
@click.option("--data", hidden=True)
def command(**kw) -> None:
    """Exact mining speed and memory: xmine vs one plain product vs the straightforward (LASER) way."""
    args = SimpleNamespace(**kw)
    if args.worker:
        print(json.dumps(worker(args.worker, args.data, args.pairs_out)))
        return

    from xmine.artefacts.directory import provenance

    with tempfile.TemporaryDirectory() as tmp:
        x, y = make_data(args.n, args.dim, seed=args.seed)
        np.save(os.path.join(tmp, "x.npy"), x)
        np.save(os.path.join(tmp, "y.npy"), y)
        del x, y
        runs = {}
        for method in METHODS:
            pairs = ["--pairs-out", os.path.join(tmp, f"{method}.npz")] if method != "matmul" else []
            runs[method] = child_json(lab_command("mining-speed", "--worker", method, "--data", tmp, *pairs))
            print(f"{method:>16}: {runs[method]['seconds']:8.2f} s   peak RSS {runs[method]['peak_rss_mb']:8.1f} MB "
                  f"(+{runs[method]['peak_rss_over_data_mb']:.1f} MB over the data)", flush=True)
        a, f = np.load(os.path.join(tmp, "xmine.npz")), np.load(os.path.join(tmp, "xmine-fp32.npz"))
        b = np.load(os.path.join(tmp, "straightforward.npz"))
        same_as_fp32 = all(np.array_equal(a[key], f[key]) for key in ("src", "tgt", "score"))
        pa = set(zip(a["src"].tolist(), a["tgt"].tolist()))
        pb = set(zip(b["src"].tolist(), b["tgt"].tolist()))
        identical = pa == pb
        score_diff = float(np.abs(np.sort(a["score"]) - np.sort(b["score"])).max()) if identical else None
    n_par = int(args.n * 0.5)
    ratios = {
        "xmine_over_matmul": round(runs["xmine"]["seconds"] / runs["matmul"]["seconds"], 3),
        "xmine_fp32_over_matmul": round(runs["xmine-fp32"]["seconds"] / runs["matmul"]["seconds"], 3),
        "straightforward_over_xmine": round(runs["straightforward"]["seconds"] / runs["xmine"]["seconds"], 3),
    }
    targets = {"xmine_over_matmul <= 0.7": ratios["xmine_over_matmul"] <= 0.7,
               "straightforward_over_xmine >= 3": ratios["straightforward_over_xmine"] >= 3}
    blas = runs["matmul"].get("blas", {})
    env = {v: os.environ.get(v, "unset") for v in ENV_VARS}
    print(f"BLAS: {blas}; environment: {env}")
    print(f"xmine ({runs['xmine'].get('product')}) / one float32 product: {ratios['xmine_over_matmul']:.2f}x "
          f"(target <= 0.7); xmine-fp32: {ratios['xmine_fp32_over_matmul']:.2f}x")
    print(f"straightforward / xmine:   {ratios['straightforward_over_xmine']:.2f}x faster (target >= 3)")
    print(f"xmine = xmine-fp32 byte for byte: {same_as_fp32}; same pairs as the straightforward way: {identical} "
          f"({len(pa)} pairs; max score difference {score_diff})")
    result = {"task": "mining_speed", "n": args.n, "dim": args.dim, "seed": args.seed, "parallel_rows": n_par,
              "product": runs["xmine"].get("product"), "blas": blas, "env": env, "runs": runs,
              "ratios": ratios, "targets_met": targets, "identical_to_fp32_path": same_as_fp32,
              "identical_pairs_to_straightforward": identical, "pairs": len(pa),
              "max_score_difference_to_straightforward": score_diff, "cpu_count": os.cpu_count(),
              "provenance": provenance(n=args.n, dim=args.dim, seed=args.seed, k=4, margin="ratio", retrieval="max",
                                       blas=blas, env=env)}
    out = args.out or results_dir() / f"mining_speed-{str(blas.get('architecture', 'unknown')).lower()}.json"
    write_speed_result(out, result, benchmark="mining_speed")
    print(f"wrote {out}")
    if not same_as_fp32:
        raise SystemExit("xmine's default product and its float32 path mined different pairs or scores")
    if not identical:
        raise SystemExit("xmine and the straightforward way mined different pairs")

