"""Corpora larger than memory: embed, exact and approximate mining, peak memory and recall.

    python benchmarks/lab/run.py scale embed-memory --work DIR [--lines 100000,1000000]
    python benchmarks/lab/run.py scale mine --n 1000000 --m 100000 --data DIR            (exact)
    python benchmarks/lab/run.py scale mine --n 200000 --m 200000 --data DIR             (exact, then
    python benchmarks/lab/run.py scale mine --n 200000 --m 200000 --data DIR --approximate   recall)
    python benchmarks/lab/run.py scale mine --n 10000000 --m 10000000 --data DIR --approximate
    python benchmarks/lab/run.py scale make-stores --n N --m M --out-dir DIR             (stores only)

Synthetic stores (float16, 384 dims) are written with xmine's own `StoreWriter`: clustered unit
vectors (sentence embeddings are not uniform: 1,000 topic centres) and HIDDEN PAIRS: in every
block of 65,536 rows a seeded tenth of the target rows are noisy copies (cosine ~0.89) of shuffled
source rows of the same block, so the first R rows of a big pair of stores equal a small pair
made with the same seed (the recall subset). Each measured command runs `xmine ...` in a fresh
process; its peak RSS is read from /proc (VmHWM) by a watcher, its time by the wall clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import click
import numpy as np

from measure import lab_command, rss_mb, write_speed_result

DIM = 384
BLOCK = 65_536
TOPICS = 1_000
HIDDEN_FRACTION = 0.1
PAIR_NOISE = 0.5  # y = x + PAIR_NOISE * g / sqrt(d): cosine ~ 1 / sqrt(1 + 0.25) = 0.89
ENCODER = {"name": "synthetic-384", "dim": DIM, "id": "synthetic-384-clustered-v1"}


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


# ---------------------------------------------------------------------------------- embed memory


class HashingEncoder:
    """A cheap encoder for the MEMORY test of `xmine embed` only (registered nowhere else): each
    word adds a seeded random 384-d vector chosen by its hash; rows L2-normalised. Its cost per
    sentence is small, so the test measures the store writer's memory, not an encoder's."""

    name = "hashing-384"
    dim = DIM

    def __init__(self):
        self._table = _unit(np.random.default_rng(7).standard_normal((1 << 14, DIM), dtype=np.float32))

    def encode(self, sentences, *, batch_size: int = 64, **_):
        out = np.zeros((len(sentences), DIM), dtype=np.float32)
        for i, s in enumerate(sentences):
            ids = [hash(w) & ((1 << 14) - 1) for w in s.split()]  # PYTHONHASHSEED=0 in the child
            out[i] = self._table[ids].sum(axis=0)
        return _unit(out)

    def fingerprint(self):
        return {"name": self.name, "dim": DIM, "id": "hashing-384-v1"}


_WORDS = ("the of and to in is was for on that with as by at from his her an were are which this "
          "be or has had not but first one new also after their its who two they been more when "
          "time city during year world known house under people team film river state school").split()


def write_text_corpus(path: Path, lines: int, *, seed: int = 0) -> None:
    """`lines` sentences of 6-20 random words, 1% of them repeated, gzip when path ends in .gz."""
    import gzip

    rng = np.random.default_rng(seed)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as f:
        for lo in range(0, lines, 100_000):
            k = min(100_000, lines - lo)
            lengths = rng.integers(6, 21, k)
            words = rng.integers(0, len(_WORDS), int(lengths.sum()))
            pos = 0
            rows = []
            for i, n in enumerate(lengths.tolist()):
                repeat = i % 100 == 99  # 1% repeats of the line before
                rows.append(rows[-1] if repeat else " ".join(_WORDS[w] for w in words[pos: pos + n]) + f" {lo + i}.")
                pos += n
            f.write("\n".join(rows) + "\n")


# ---------------------------------------------------------------------------------- measuring


def run_measured(cmd: list[str], *, env: dict | None = None) -> dict:
    """Run `cmd`; its wall time, peak RSS (VmHWM of the process, sampled until it exits), stdout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, text=True)
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, rss_mb(proc.pid))
        time.sleep(0.2)
    stdout = proc.stdout.read() if proc.stdout else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit status {proc.returncode}")
    return {"seconds": round(time.perf_counter() - t0, 1), "peak_rss_mb": round(peak, 1),
            "command": " ".join(cmd), "stdout": stdout.strip()[-2000:]}


def _xmine(*args) -> list[str]:
    return [sys.executable, "-m", "xmine.cli", *map(str, args)]


def hidden_recall(mined_tsv: Path, hidden: np.ndarray) -> dict:
    """Pairs mined, and how many hidden pairs among them (rows from the synthetic sentences)."""
    found = set()
    with open(mined_tsv, encoding="utf-8") as f:
        for line in f:
            _, s, t = line.rstrip("\n").split("\t")[:3]
            found.add((int(s.split()[1]), int(t.split()[1])))
    gold = set(map(tuple, hidden.tolist()))
    hits = len(found & gold)
    return {"pairs": len(found), "hidden": len(gold), "hidden_found": hits, "recall": hits / max(1, len(gold)),
            "precision": hits / max(1, len(found)), "_found": found}


def _save(section: str, result: dict, out: Path) -> None:
    """Merge one measurement into the results JSON (an earlier result of this benchmark is
    extended, anything else refused: xmine.artefacts.outputs), with machine and provenance."""
    from xmine.artefacts.directory import provenance
    from xmine.benchmarks.common import machine, read_result

    data = read_result(out) if out.is_file() else {}
    measurements = {**data.get("measurements", {}), section: result}
    write_speed_result(out, {"task": "scale", "measurements": measurements, "machine": machine(),
                             "provenance": provenance(benchmark="scale"), "table": _table(measurements)},
                       benchmark="scale")


def _table(ms: dict) -> dict:
    return {"columns": ["measurement", "rows", "peak RSS (MB)", "seconds", "note"],
            "rows": [[name, r.get("rows", ""), r.get("peak_rss_mb", float("nan")), r.get("seconds", float("nan")),
                      r.get("note", "")] for name, r in ms.items()]}


@click.group("scale")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Results JSON, merged (default: benchmarks/results/scale.json).")
@click.pass_context
def command(ctx, out) -> None:
    """Corpora larger than memory: peak RSS and time of embed and of exact/approximate mining."""
    from xmine.benchmarks.common import results_dir

    ctx.obj = out or results_dir() / "scale.json"


@command.command("make-stores")
@click.option("--n", type=int, required=True)
@click.option("--m", type=int, required=True)
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--seed", type=int, default=0, show_default=True)
def make_stores_cmd(n, m, out_dir, seed) -> None:
    """Write synthetic src/tgt stores with hidden pairs."""
    print(json.dumps(make_stores(n, m, out_dir, seed=seed)))


@command.command("_embed-child", hidden=True)
@click.argument("corpus")
@click.argument("out")
def embed_child_cmd(corpus, out) -> None:
    from xmine.store import embed_corpus

    store = embed_corpus(corpus, out, encoder=HashingEncoder(), lang="en", show_progress=False)
    print(json.dumps({"rows": len(store), "unique": store.manifest.input_stats["unique_sentences"]}))


@command.command("collect")
@click.argument("files", nargs=-1, required=True)
@click.pass_obj
def collect_cmd(out: Path, files) -> None:
    """Merge the measurements of other result files into --out."""
    from xmine.benchmarks.common import read_result

    for f in files:
        for section, result in read_result(f)["measurements"].items():
            _save(section, result, out)
    print(f"{out}: {len(read_result(out)['measurements'])} measurements")


@command.command("embed-memory")
@click.option("--lines", default="100000,1000000", show_default=True, help="Corpus sizes, comma-separated.")
@click.option("--work", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.pass_obj
def embed_memory_cmd(out: Path, lines, work) -> None:
    """Peak RSS of embed on corpora of different sizes."""
    import shutil

    work.mkdir(parents=True, exist_ok=True)
    res = {}
    for n in [int(v) for v in lines.split(",")]:
        corpus = work / f"corpus-{n}.txt.gz"
        if not corpus.is_file():
            write_text_corpus(corpus, n)
        store = work / f"store-{n}"
        shutil.rmtree(store, ignore_errors=True)
        r = run_measured(lab_command("scale", "_embed-child", corpus, store), env={"PYTHONHASHSEED": "0"})
        r.update(json.loads(r.pop("stdout").splitlines()[-1]), note="xmine embed (streaming, gzip input), "
                 "cheap hashing encoder, shards of 50k")
        res[n] = r
        _save(f"embed {n:,} lines", r, out)
        shutil.rmtree(store, ignore_errors=True)
        print(n, r, flush=True)
    sizes = sorted(res)
    ratio = res[sizes[-1]]["peak_rss_mb"] / res[sizes[0]]["peak_rss_mb"]
    print(f"peak RSS {sizes[-1]:,} / {sizes[0]:,} lines: {ratio:.3f} (target < 1.10)")


@command.command("mine")
@click.option("--n", type=int, required=True)
@click.option("--m", type=int, required=True)
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Where the stores are (or are made).")
@click.option("--threshold", type=float, default=1.2, show_default=True)
@click.option("--approximate", is_flag=True)
@click.option("--nlist", type=int, default=None)
@click.option("--nprobe", type=int, default=None)
@click.option("--label", default=None)
@click.pass_obj
def mine_cmd(out_json: Path, **kw) -> None:
    """Peak RSS and time of `xmine mine` on synthetic stores (made if absent)."""
    from xmine.artefacts.fileio import load_manifest

    args = SimpleNamespace(**kw)
    d = args.data
    if not (d / "hidden.npy").is_file():
        print(json.dumps(make_stores(args.n, args.m, d)), flush=True)
    out = d / ("mined-approx.tsv" if args.approximate else "mined-exact.tsv")
    cmd = _xmine("mine", d / "src", d / "tgt", "-o", out, "--threshold", args.threshold)
    if args.approximate:
        cmd += ["--approximate", *(["--nlist", str(args.nlist)] if args.nlist else []),
                *(["--nprobe", str(args.nprobe)] if args.nprobe else [])]
    r = run_measured(cmd)
    rec = hidden_recall(out, np.load(d / "hidden.npy"))
    found = rec.pop("_found")
    r.update(rec, rows=f"{args.n:,} x {args.m:,}",
             note=("approximate" if args.approximate else "exact") + f", threshold {args.threshold}, "
                  f"hidden-pair recall {rec['recall']:.4f}, precision {rec['precision']:.4f}")
    summary = load_manifest(Path(str(out) + ".json"), what="summary")
    r["search"] = summary["search"]
    r["provenance_parameters"] = summary["provenance"].get("parameters")
    other = d / ("mined-exact.tsv" if args.approximate else "mined-approx.tsv")
    if other.is_file():  # both runs on this data: how many of the other's pairs this one found
        theirs = hidden_recall(other, np.load(d / "hidden.npy"))
        r["agreement_with_" + ("exact" if args.approximate else "approximate")] = (
            len(found & theirs["_found"]) / max(1, len(theirs["_found"])))
        if args.approximate:
            r["hidden_recall_vs_exact"] = rec["hidden_found"] / max(1, theirs["hidden_found"])
    label = args.label or f"mine {'approximate' if args.approximate else 'exact'} {args.n:,} x {args.m:,}"
    _save(label, {k: v for k, v in r.items() if k != "stdout"}, out_json)
    print(json.dumps({k: v for k, v in r.items() if k != "stdout"}, indent=1))

