"""`--ray` against the single process on this machine: the same commands, timed, outputs compared.

    python benchmarks/lab/run.py ray-speed embed [--n 20000] [--shard-rows 1000]
    python benchmarks/lab/run.py ray-speed mine  [--n 200000]
    python benchmarks/lab/run.py ray-speed both

- embed: `xmine embed` on n real sentences (FLORES-200 devtest of 20 languages in 10 scripts, in
  order: `EMBED_LANGS`) with the default encoder, once in one process (torch with a thread
  per core) and once with `--ray auto` (a local cluster with this machine's CPUs: one encoder
  actor per CPU, one thread each). Target: the Ray run takes <= 1.15x the single-process time,
  start-up of Ray and of every actor's encoder included. The two stores are compared shard by
  shard.
- mine: two embedding stores of n seeded vectors each (mining_speed's data: half of one side
  noisy copies of the other's rows), `xmine mine` exact in one process and with `--ray auto`
  (tiles of the product as tasks). Target: the same pairs (the TSVs are compared byte for byte).

Each command runs in its own subprocess, timed end to end. The result goes to
benchmarks/results/ray_speed.json with the machine, the BLAS kernel and the environment.
`--unset-openblas` runs the commands with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (what
users' machines do) and records it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import click
import numpy as np

from measure import child_json, write_speed_result
from xmine.benchmarks.common import machine, read_result, results_dir

XMINE = [sys.executable, "-m", "xmine.cli"]
LOADS: list[float | None] = []  # load average at the start of each timed command


def blas_kernel(env: dict[str, str]) -> list[dict]:
    code = ("import json, numpy; from threadpoolctl import threadpool_info; "
            "print(json.dumps([{k: p.get(k) for k in ('internal_api', 'architecture', 'num_threads', 'version')} "
            "for p in threadpool_info()]))")
    return child_json([sys.executable, "-c", code], env=env)


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    LOADS.append(os.getloadavg()[0])  # other processes on a shared machine slow both runs
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return seconds


def compare_stores(a: Path, b: Path) -> dict:
    """Same shard files? Where they differ, the largest difference of any value."""
    from xmine.store import EmbeddingStore

    sa, sb = EmbeddingStore.open(a), EmbeddingStore.open(b)
    same_text = (a / "sentences.txt").read_bytes() == (b / "sentences.txt").read_bytes()
    same_lines = (a / "line_numbers.npy").read_bytes() == (b / "line_numbers.npy").read_bytes()
    files = [s.file for s in sa.manifest.shards]
    identical = [(a / f).read_bytes() == (b / f).read_bytes() for f in files]
    diff = max(float(np.abs(x.astype(np.float32) - y.astype(np.float32)).max())
               for x, y in zip(sa.shard_arrays(), sb.shard_arrays()))
    return {"sentences_equal": same_text, "line_numbers_equal": same_lines, "shards": len(files),
            "shards_byte_identical": int(sum(identical)), "max_abs_difference": diff}


#: FLORES-200 devtest languages the embed corpus is drawn from, in order (10 scripts; 1,012 lines each)
EMBED_LANGS = ("eng_Latn", "deu_Latn", "rus_Cyrl", "zho_Hans", "arb_Arab", "hin_Deva", "jpn_Jpan", "kor_Hang",
               "fra_Latn", "spa_Latn", "ita_Latn", "por_Latn", "pol_Latn", "ces_Latn", "ukr_Cyrl", "tur_Latn",
               "vie_Latn", "ell_Grek", "heb_Hebr", "tha_Thai")


def embed_corpus(n: int) -> list[str]:
    """The first n lines of EMBED_LANGS' FLORES-200 devtest files, language after language."""
    from xmine.benchmarks.common import FLORES_DEVTEST, flores_lines
    from xmine.paths import default_data_dir

    sentences: list[str] = []
    for code in EMBED_LANGS:
        sentences += [s for s in flores_lines(default_data_dir() / FLORES_DEVTEST, code) if s.strip()]
        if len(sentences) >= n:
            return sentences[:n]
    raise SystemExit(f"only {len(sentences)} sentences in {len(EMBED_LANGS)} FLORES-200 languages; ask for fewer")


def run_embed(n: int, shard_rows: int, env: dict[str, str], work: Path) -> dict:
    sentences = embed_corpus(n)
    corpus = work / "corpus.txt"
    corpus.write_text("".join(s.replace("\t", " ") + "\n" for s in sentences), encoding="utf-8")
    common = ["embed", str(corpus), "--lang", "mul", "--shard-rows", str(shard_rows), "-q"]
    single = _timed(XMINE + common + ["-o", str(work / "single")], env)
    on_ray = _timed(XMINE + common + ["-o", str(work / "ray"), "--ray", "auto"], env)
    return {"sentences": len(sentences), "languages": EMBED_LANGS[: -(-len(sentences) // 1012)],
            "shard_rows": shard_rows, "single_process_s": round(single, 1),
            "ray_s": round(on_ray, 1), "ratio": round(on_ray / single, 3), "target_ratio": 1.15,
            "single_sentences_per_s": round(len(sentences) / single, 1),
            "ray_sentences_per_s": round(len(sentences) / on_ray, 1),
            "stores": compare_stores(work / "single", work / "ray")}


def write_vector_store(out: Path, emb: np.ndarray, prefix: str, *, shard_rows: int = 50_000) -> None:
    """An embedding store of given vectors (text "<prefix><row>") written by xmine's own writer, with
    an encoder fingerprint that says what they are."""
    from xmine.store import StoreWriter

    fingerprint = {"name": "seeded-vectors", "id": "mining_speed.make_data-seed0", "dim": int(emb.shape[1])}
    with StoreWriter(out, encoder=fingerprint, lang="xx" if prefix == "x" else "yy", dim=emb.shape[1],
                     shard_rows=shard_rows, params={"generated_by": "benchmarks/lab ray-speed"}) as w:
        for start in range(0, len(emb), shard_rows):
            part = emb[start:start + shard_rows]
            w.add(part, [f"{prefix}{r}" for r in range(start, start + len(part))])


def run_mine(n: int, env: dict[str, str], work: Path) -> dict:
    from mining_speed import make_data

    x, y = make_data(n, 384, seed=0)
    write_vector_store(work / "x", x, "x")
    write_vector_store(work / "y", y, "y")
    del x, y
    common = ["mine", str(work / "x"), str(work / "y"), "--threshold", "1.04"]
    single = _timed(XMINE + common + ["-o", str(work / "single.tsv")], env)
    on_ray = _timed(XMINE + common + ["-o", str(work / "ray.tsv"), "--ray", "auto"], env)
    a, b = (work / "single.tsv").read_bytes(), (work / "ray.tsv").read_bytes()
    return {"rows_per_side": n, "single_process_s": round(single, 1), "ray_s": round(on_ray, 1),
            "ratio": round(on_ray / single, 3), "pairs": a.count(b"\n"), "tsv_byte_identical": a == b,
            "same_pairs": {tuple(r.split(b"\t")[1:3]) for r in a.splitlines()}
            == {tuple(r.split(b"\t")[1:3]) for r in b.splitlines()}}


@click.command("ray-speed")
@click.argument("what", type=click.Choice(["embed", "mine", "both"]))
@click.option("--n", type=int, default=None, help="Sentences (embed: 20000) or rows per side (mine: 200000).")
@click.option("--shard-rows", type=int, default=1000, show_default=True)
@click.option("--unset-openblas", is_flag=True, help="Run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Result JSON (default: benchmarks/results/ray_speed.json).")
def command(**kw) -> None:
    """`--ray` against one process on this machine: embed and mine timed, outputs compared."""
    args = SimpleNamespace(**kw)
    args.out = args.out or results_dir() / "ray_speed.json"
    unset = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if args.unset_openblas else ()
    env = {k: v for k, v in os.environ.items() if k not in unset}
    previous = read_result(args.out) if args.out.is_file() else {}
    key = "unset_openblas" if args.unset_openblas else "machine_env"
    runs = previous.get("runs", {})
    run = dict(runs.get(key, {}))
    # Each measurement carries the environment it ran in (one kept from an earlier run may differ).
    measured = {"env": {k: env.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}, "blas": blas_kernel(env)}
    jobs = {"embed": lambda d: run_embed(args.n or 20_000, args.shard_rows, env, d),
            "mine": lambda d: run_mine(args.n or 200_000, env, d)}
    with tempfile.TemporaryDirectory(prefix="xmine-ray-speed-") as tmp:
        for what, job in jobs.items():
            if args.what in (what, "both"):
                (Path(tmp) / what).mkdir()
                first = len(LOADS)
                run[what] = {**job(Path(tmp) / what), **measured, "load_average_at_starts": LOADS[first:]}
                print(json.dumps(run[what], indent=1))
    from xmine.artefacts.directory import provenance

    runs[key] = run
    result = {"machine": machine(), "runs": runs, "provenance": provenance(benchmark="ray_speed")}
    write_speed_result(args.out, result, benchmark="ray_speed")

