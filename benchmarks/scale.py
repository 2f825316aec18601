"""Corpora larger than memory: embed, exact and approximate mining, peak memory and recall.

    python -m xmine.benchmarks.scale make-stores --n 10000000 --m 10000000 --out-dir DIR
    python -m xmine.benchmarks.scale embed-memory [--lines 100000,1000000]
    python -m xmine.benchmarks.scale exact-memory --n 1000000 --m 100000
    python -m xmine.benchmarks.scale approximate --n 10000000 --m 10000000 --work DIR
    python -m xmine.benchmarks.scale recall --n 200000 --m 200000

Synthetic stores (float16, 384 dims) are written with xmine's own `StoreWriter`: clustered unit
vectors (sentence embeddings are not uniform: 1,000 topic centres) and HIDDEN PAIRS: in every
block of 65,536 rows a seeded tenth of the target rows are noisy copies (cosine ~0.89) of shuffled
source rows of the same block, so the first R rows of a big pair of stores equal a small pair
made with the same seed (the recall subset). Each measured command runs `xmine ...` in a fresh
process; its peak RSS is read from /proc (VmHWM) by a watcher, its time by the wall clock.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DIM = 384
BLOCK = 65_536
TOPICS = 1_000
HIDDEN_FRACTION = 0.1
PAIR_NOISE = 0.5  # y = x + PAIR_NOISE * g / sqrt(d): cosine ~ 1 / sqrt(1 + 0.25) = 0.89
ENCODER = {"name": "synthetic-384", "dim": DIM, "id": "synthetic-384-clustered-v1"}
RESULTS = Path(__file__).resolve().parent / "results"


def _unit(a: np.ndarray) -> np.ndarray:
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    return a


def synthetic_block(b: int, rows_x: int, rows_y: int, *, seed: int = 0):
    """Block b of both sides: (x, y, hidden) with hidden = (x_row, y_row) pairs inside the block."""
    centres = _unit(np.random.default_rng([seed, 0]).standard_normal((TOPICS, DIM), dtype=np.float32))
    rng = np.random.default_rng([seed, 1, b])

    def side(rows):
        topic = rng.integers(0, TOPICS, rows)
        return _unit(0.6 * centres[topic] + rng.standard_normal((rows, DIM), dtype=np.float32) / np.sqrt(DIM))

    x, y = side(rows_x), side(rows_y)
    k = int(min(rows_x, rows_y) * HIDDEN_FRACTION)
    xs = rng.choice(rows_x, k, replace=False)
    ys = rng.choice(rows_y, k, replace=False)
    y[ys] = _unit(x[xs] + PAIR_NOISE * rng.standard_normal((k, DIM), dtype=np.float32) / np.sqrt(DIM))
    return x, y, np.stack([xs, ys], axis=1)


def make_stores(n: int, m: int, out_dir: Path, *, seed: int = 0, shard_rows: int = 1_000_000) -> dict:
    """Write src/ and tgt/ stores of n and m rows and hidden.npy (global (src_row, tgt_row) pairs)."""
    from tqdm import tqdm

    from xmine.store import StoreWriter

    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    hidden = []
    params = {"synthetic": True, "seed": seed, "topics": TOPICS, "hidden_fraction": HIDDEN_FRACTION}
    with StoreWriter(out_dir / "src", encoder=ENCODER, lang="xx", dim=DIM, shard_rows=shard_rows,
                     params=params) as wx, \
         StoreWriter(out_dir / "tgt", encoder=ENCODER, lang="yy", dim=DIM, shard_rows=shard_rows,
                     params=params) as wy:
        for b in tqdm(range(-(-max(n, m) // BLOCK)), desc="synthetic stores", unit="block"):
            lo = b * BLOCK
            rx, ry = max(0, min(BLOCK, n - lo)), max(0, min(BLOCK, m - lo))
            x, y, pairs = synthetic_block(b, max(rx, 1), max(ry, 1), seed=seed)
            if rx:
                wx.add(x[:rx], [f"src {lo + i} " for i in range(rx)])
            if ry:
                wy.add(y[:ry], [f"tgt {lo + i} " for i in range(ry)])
            ok = (pairs[:, 0] < rx) & (pairs[:, 1] < ry)
            hidden.append(pairs[ok] + lo)
    np.save(out_dir / "hidden.npy", np.concatenate(hidden))
    return {"n": n, "m": m, "seconds": time.perf_counter() - t0,
            "bytes": sum(f.stat().st_size for f in out_dir.rglob("*") if f.is_file())}


# ---------------------------------------------------------------------------------- measuring


def run_measured(cmd: list[str], *, env: dict | None = None) -> dict:
    """Run `cmd`; its wall time and peak RSS (VmHWM of the process, sampled until it exits)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})})
    peak = 0
    status = Path(f"/proc/{proc.pid}/status")
    while proc.poll() is None:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.2)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit status {proc.returncode}")
    return {"seconds": round(time.perf_counter() - t0, 1), "peak_rss_mb": round(peak / 1024, 1),
            "command": " ".join(cmd)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    mk = sub.add_parser("make-stores", help="write synthetic src/tgt stores with hidden pairs")
    mk.add_argument("--n", type=int, required=True)
    mk.add_argument("--m", type=int, required=True)
    mk.add_argument("--out-dir", type=Path, required=True)
    mk.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.what == "make-stores":
        print(json.dumps(make_stores(args.n, args.m, args.out_dir, seed=args.seed)))


if __name__ == "__main__":
    main(sys.argv[1:])
