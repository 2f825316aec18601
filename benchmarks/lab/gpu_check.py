"""Lab: every GPU path of xmine, run for real against its CPU result, with timings.

    bash scripts/gpu-check.sh          (sets up, then: .venv/bin/python benchmarks/lab/run.py gpu-check)

Each check runs the same public command twice, on the CPU and on the GPU, times both and compares
what they wrote:
- `encoder`: `xmine embed --device cpu` vs `--device cuda` (the CUDA encoder; fp32 and its auto
  precision): the minimum cosine between the two stores' rows, each command's wall time and the
  encoding rate it reports (without the process start and model load);
- `product`: `exact_knn_both` with the fp32 product vs the cuda product: the result must be the
  same bytes (the exact search rescores every candidate, see mining/knn_product.py);
- `faiss-flat` / `faiss-ivf`: `xmine build-index` and `xmine search` with no GPU visible vs on the GPU:
  the flat hits must be the same; IVF hits are compared by their overlap (training and list
  assignment differ in rounding, so the lists may too);
- `ray-gpu`: `xmine mine --ray` on a local cluster that has the GPU vs `xmine mine` in one process:
  the same bytes.
A machine without a CUDA GPU is refused in one line: nothing here may fall back to the CPU
silently. The result JSON (benchmarks/results/gpu-check.json) records the machine, the GPU, the
versions and every timing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
XMINE = [sys.executable, "-m", "xmine.cli"]


CHECKS = ("encoder", "product", "faiss-flat", "faiss-ivf", "ray-gpu")


def _gpu_or_exit(checks: tuple[str, ...]) -> str:
    import torch

    from xmine.errors import ConfigError

    if not torch.cuda.is_available():
        raise ConfigError("no CUDA GPU is visible to torch: the GPU paths cannot be checked on this machine")
    if any(c.startswith("faiss-") for c in checks):
        try:
            import faiss
        except ImportError:
            raise ConfigError("the faiss checks need faiss-gpu, and faiss is not installed "
                              "(see docs/encoders.md#gpu; or leave them out with --checks)") from None
        if getattr(faiss, "get_num_gpus", lambda: 0)() < 1:
            raise ConfigError("faiss reports no GPU (is faiss-gpu installed in place of faiss-cpu? see "
                              "docs/encoders.md#gpu; or leave the faiss checks out with --checks)")
    return torch.cuda.get_device_name(0)


def _cuda_version() -> str | None:
    import torch

    return torch.version.cuda


def _checks(value: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    unknown = [n for n in names if n not in CHECKS]
    if unknown or not names:
        raise click.BadParameter(f"{', '.join(unknown) or 'nothing'}: choose from {', '.join(CHECKS)}")
    return names


def _run(*args, env=None) -> float:
    """Run one xmine command (raises with its stderr on failure); its wall time in seconds."""
    return _run_output(*args, env=env)[0]


def _run_output(*args, env=None) -> tuple[float, str]:
    """Run one xmine command (raises with its stderr on failure): (its wall time in seconds, what it
    printed)."""
    t = time.perf_counter()
    proc = subprocess.run([*XMINE, *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise click.ClickException(f"xmine {' '.join(map(str, args))} failed:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t, proc.stdout + proc.stderr


def _encoding_rate(printed: str) -> float | None:
    """The sentences a second `xmine embed` reports for its encoding alone (its summary line), which
    leaves out the process start and the model load that its wall time holds."""
    found = re.search(r"\(([0-9.]+) sentences/s\)", printed)
    return float(found.group(1)) if found else None


def _corpus(tmp: Path, lines: int) -> tuple[Path, Path]:
    """German and English news sentences (WMT newstest 2008-2021, de-en), `lines` a side."""
    from xmine.paths import resolve_data_dir

    root = resolve_data_dir(None, needs="parallel/wmt-newstest", how_to_get="see ../shared/data/README.md")
    out = {}
    for lang in ("de", "en"):
        rows: list[str] = []
        for f in sorted(root.glob(f"*/de-en/*.{lang}")):
            rows += [s for s in f.read_text(encoding="utf-8").splitlines() if s.strip()]
            if len(rows) >= lines:
                break
        out[lang] = tmp / f"news.{lang}"
        out[lang].write_text("\n".join(rows[:lines]) + "\n", encoding="utf-8")
    return out["de"], out["en"]


def check_encoder(tmp: Path, de: Path) -> dict:
    from xmine.store import EmbeddingStore

    result = {}
    for precision in ("fp32", "auto"):
        stores = {}
        for device in ("cpu", "cuda"):
            stores[device] = tmp / f"enc-{precision}-{device}"
            wall, printed = _run_output("embed", de, "--lang", "de", "--device", device, "--precision", precision,
                                        "--dtype", "float32", "-q", "-o", stores[device])
            result[f"{precision}_{device}_s"] = round(wall, 2)
            result[f"{precision}_{device}_sentences_per_s"] = _encoding_rate(printed)
        a, b = (EmbeddingStore.open(stores[d]).rows()[:].astype(np.float32) for d in ("cpu", "cuda"))
        result[f"{precision}_min_cosine"] = float((a * b).sum(axis=1).min())
    result["ok"] = result["fp32_min_cosine"] >= 0.999
    return result


def check_product(rows: int) -> dict:
    from xmine.mining.knn import exact_knn_both

    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((rows, 384), dtype=np.float32) for _ in range(2))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    timings, results = {}, {}
    for product in ("fp32", "cuda"):
        t = time.perf_counter()
        results[product] = exact_knn_both(x, y, 4, product=product)
        timings[f"{product}_s"] = round(time.perf_counter() - t, 2)
    same = all(np.array_equal(a, b) for a, b in zip(results["fp32"], results["cuda"]))
    return {"rows": rows, **timings, "same_bytes": same, "ok": same}


def check_faiss(tmp: Path, store: Path, queries: Path, kind: str) -> dict:
    timings, hits = {}, {}
    for where in ("cpu", "gpu"):
        # FAISS sees no GPU in the CPU run: both the build and the search stay on the CPU
        env = {"CUDA_VISIBLE_DEVICES": ""} if where == "cpu" else None
        idx = tmp / f"idx-{kind}-{where}"
        timings[f"build_{where}_s"] = round(_run("build-index", store, "--index-type", kind, "-o", idx, env=env), 2)
        out = tmp / f"hits-{kind}-{where}.tsv"
        timings[f"search_{where}_s"] = round(_run("search", idx, queries, "-k", 10, "-o", out, env=env), 2)
        hits[where] = [tuple(r.split("\t")[:4:3]) for r in out.read_text(encoding="utf-8").splitlines()]
    overlap = len(set(hits["cpu"]) & set(hits["gpu"])) / max(1, len(hits["cpu"]))
    ok = overlap == 1.0 if kind == "flat" else overlap >= 0.95
    return {**timings, "hit_overlap": round(overlap, 4), "ok": ok}


def check_ray(tmp: Path, de_store: Path, en_store: Path, with_index: bool) -> dict:
    """`--ray auto` starts a local cluster of this machine, its GPU included (Ray detects it).
    `with_index`: also build an IVF index on Ray (needs faiss)."""
    local, on_ray = tmp / "mined-local.tsv", tmp / "mined-ray.tsv"
    result = {"local_s": round(_run("mine", de_store, en_store, "-o", local), 2),
              "ray_s": round(_run("mine", de_store, en_store, "-o", on_ray, "--ray", "auto"), 2)}
    if with_index:
        result["ray_build_index_s"] = round(_run("build-index", en_store, "--index-type", "ivf", "-o", tmp / "idx-ray",
                                                 "--ray", "auto"), 2)
    same = local.read_bytes() == on_ray.read_bytes()
    pairs = len(local.read_text(encoding="utf-8").splitlines())
    return {**result, "pairs": pairs, "same_bytes": same, "ok": same and pairs > 0}


@click.command("gpu-check")
@click.option("--lines", type=click.IntRange(min=1), default=20000, show_default=True,
              help="News sentences a side for the encoder, index and mining checks.")
@click.option("--product-rows", type=click.IntRange(min=1), default=100000, show_default=True,
              help="Rows a side of the exact-product check.")
@click.option("--checks", "chosen", default=",".join(CHECKS), show_default=True, callback=lambda c, p, v: _checks(v),
              help="Comma-separated checks to run (a machine without faiss-gpu or Ray can run the others); "
                   "the result JSON lists those left out.")
@click.option("--out", default=str(ROOT / "benchmarks" / "results" / "gpu-check.json"), show_default=True,
              help="Result JSON to write.")
def command(lines: int, product_rows: int, chosen: tuple[str, ...], out: str) -> None:
    """Run every GPU path (CUDA encoder, cuda product, faiss-gpu flat and IVF, Ray with a GPU)
    against the CPU result and print the timings; exit 1 when a GPU result differs."""
    gpu = _gpu_or_exit(chosen)
    from measure import blas_info, installed_version, write_speed_result
    from xmine.artefacts.directory import provenance
    from xmine.benchmarks.common import machine

    checks: dict[str, dict] = {}

    def run_check(name: str, check, *args) -> None:
        """Run one check; a failure is its result (the others still run), printed as it ends."""
        try:
            checks[name] = check(*args)
        except Exception as e:  # noqa: BLE001 - a failed check is a result of this lab run, not its end
            checks[name] = {"error": f"{type(e).__name__}: {str(e)[-1500:]}", "ok": False}
        c = checks[name]
        click.echo(f"{name:12s} {'OK  ' if c['ok'] else 'DIFF'} " + ", ".join(f"{k}={v}" for k, v in c.items() if k != "ok"))

    with tempfile.TemporaryDirectory(prefix="xmine-gpu-check-") as d:
        tmp = Path(d)
        de, en = _corpus(tmp, lines)
        if "encoder" in chosen:
            run_check("encoder", check_encoder, tmp, de)
        if "product" in chosen:
            run_check("product", check_product, product_rows)
        stores = {}
        if {"faiss-flat", "faiss-ivf", "ray-gpu"} & set(chosen):
            for lang, path in (("de", de), ("en", en)):
                stores[lang] = tmp / f"store-{lang}"
                _run("embed", path, "--lang", lang, "-q", "-o", stores[lang])
        for kind in ("flat", "ivf"):
            if f"faiss-{kind}" in chosen:
                run_check(f"faiss-{kind}", check_faiss, tmp, stores["en"], de, kind)
        if "ray-gpu" in chosen:
            run_check("ray-gpu", check_ray, tmp, stores["de"], stores["en"], "faiss-ivf" in chosen)
    write_speed_result(out, {"task": "gpu_check", "gpu": gpu, "machine": machine(), "lines": lines, "checks": checks,
                             "not_run": [c for c in CHECKS if c not in chosen],
                             "provenance": provenance(benchmark="gpu-check", lines=lines, product_rows=product_rows,
                                                      checks=list(chosen), blas=blas_info()),
                             "cuda": _cuda_version(), "versions": {p: installed_version(p) for p in (
                                 "torch", "transformers", "sentence-transformers", "faiss-gpu", "faiss-cpu", "ray")}},
                       benchmark="gpu-check")
    click.echo(f"wrote {out}")
    if not all(c["ok"] for c in checks.values()):
        sys.exit(1)
