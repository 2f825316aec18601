"""What a mined row costs in peak memory, per search path, against the figure docs/scaling.md states.

    python benchmarks/lab/run.py memory-per-row --small C --large A --other D [--paths exact,approximate]

C and A are stores of one side at two sizes, D a store of the other side (e.g. use-m3 stores of
English Tatoeba-challenge sentences: 20k, 200k and another 20k). For each path, `xmine mine` runs
in a fresh process on C x D, A x D, D x C and D x A; the growth of its peak RSS (VmHWM) from C to
A, divided by the rows added, is the cost of a row on that side: what grows with the corpus
(per-row state), since the block buffers are the same in both runs. A float32 copy of a side
would show as 4 x dim bytes a row. The result JSON records the machine, the BLAS kernel
(threadpoolctl) and the versions; measurements of other paths in the same file are kept.
"""

from __future__ import annotations

from pathlib import Path

import click

from measure import installed_version, write_speed_result
from scale import _xmine, run_measured

#: path name -> extra `xmine mine` options
PATHS = {
    "exact": [],
    "exact-fp32": ["--product", "fp32"],
    "exact-bf16": ["--product", "bf16"],
    "exact-raw": ["--no-pre-clean", "--no-filters", "--no-lang-filter"],
    "approximate": ["--approximate"],
}
#: the most bytes a row of the larger side that docs/scaling.md states for each path ("what grows" table)
DOCUMENTED = {"exact": 620, "exact-fp32": 620, "exact-bf16": 620, "exact-raw": 620, "approximate": 520}


def _environment() -> dict:
    from threadpoolctl import threadpool_info

    from xmine.benchmarks.common import machine

    blas = [{k: p.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
            for p in threadpool_info() if p.get("user_api") == "blas"]
    return {"machine": machine(), "blas": blas,
            "versions": {d: installed_version(d) for d in ("xmine", "numpy", "faiss-cpu", "torch", "numba")}}


@click.command("memory-per-row")
@click.option("--small", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Store of one side, smaller.")
@click.option("--large", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Store of the same side, larger.")
@click.option("--other", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Store of the other side.")
@click.option("--paths", default=",".join(PATHS), show_default=True, help="Paths to measure, comma-separated.")
@click.option("--work", type=click.Path(file_okay=False, path_type=Path), default=Path("out/memory-per-row"),
              show_default=True, help="Where the mined files go.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Results JSON, merged (default: benchmarks/results/memory_per_row.json).")
def command(small, large, other, paths, work, out) -> None:
    """Peak-memory cost of a mined row per search path (either side larger), against the documented figure."""
    from xmine.benchmarks.common import read_result, results_dir
    from xmine.store import EmbeddingStore

    out = out or results_dir() / "memory_per_row.json"
    rows = {p: len(EmbeddingStore.open(p)) for p in (small, large, other)}
    work.mkdir(parents=True, exist_ok=True)
    data = read_result(out) if out.is_file() else {}
    measurements = data.get("measurements", {})
    for name in paths.split(","):
        peaks = {}
        for label, pair in (("small x other", (small, other)), ("large x other", (large, other)),
                            ("other x small", (other, small)), ("other x large", (other, large))):
            mined = work / f"{name}-{label.replace(' ', '_')}.tsv"
            r = run_measured(_xmine("mine", *pair, "-o", mined, "-q", "--overwrite", *PATHS[name]))
            peaks[label] = r["peak_rss_mb"]
        added = rows[large] - rows[small]
        result = {"options": PATHS[name], "peak_rss_mb": peaks, "documented_bytes_a_row": DOCUMENTED[name]}
        for side, (a, b) in (("src", ("small x other", "large x other")), ("tgt", ("other x small", "other x large"))):
            result[f"{side} larger: growth MB"] = round(peaks[b] - peaks[a], 1)
            result[f"{side} larger: bytes a row"] = round((peaks[b] - peaks[a]) * 2**20 / added)
        measurements[name] = result
        print(f"{name:12s} " + "  ".join(f"{side} larger {result[f'{side} larger: bytes a row']:5d} B a row "
                                        f"(+{result[f'{side} larger: growth MB']:.0f} MB)" for side in ("src", "tgt"))
              + f"  documented <= {DOCUMENTED[name]} B", flush=True)
    save(out, measurements, {str(p): n for p, n in rows.items()})


def save(out: Path, measurements: dict, stores: dict) -> None:
    """Write the results JSON: the measurements against the documented figures, the machine, BLAS,
    versions and provenance."""
    from xmine.artefacts.directory import provenance

    for name, r in measurements.items():
        r["documented_bytes_a_row"] = DOCUMENTED[name]
    write_speed_result(out, {"task": "memory_per_row", "stores": stores, "measurements": measurements,
                             "table": _table(measurements), **_environment(),
                             "provenance": provenance(benchmark="memory-per-row")}, benchmark="memory-per-row")


def _table(measurements: dict) -> dict:
    return {"columns": ["path", "src larger: B a row", "tgt larger: B a row", "src larger: MB", "tgt larger: MB",
                        "documented B a row"],
            "rows": [[name, r["src larger: bytes a row"], r["tgt larger: bytes a row"], r["src larger: growth MB"],
                      r["tgt larger: growth MB"], r["documented_bytes_a_row"]] for name, r in measurements.items()]}
