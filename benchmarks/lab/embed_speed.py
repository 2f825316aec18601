"""Encoding speed by precision and runtime: torch fp32 vs bf16 vs OpenVINO (and what else was tried), one run.

Sentences: a seeded sample of `--per-lang` FLORES-200 devtest sentences (news-length) in each of
eight languages and six scripts (Latin, Cyrillic, Han, Arabic, Devanagari, Japanese, Hangul),
2,000 by default, all "query: "-prefixed and encoded by the me5-small fast path that `xmine embed`
and `xmine mine` run (`TokenBatchedEncoder`). Variants:

- `fp32`: the weights as trained, float32 throughout, run by torch (the path before precisions existed);
- `bf16`: weights cast to bfloat16 once (`load_encoder(precision="bf16", runtime="torch")`), pooling
  and normalisation in float32;
- `ov-fp32`, `ov-bf16`, `ov-int8`: the OpenVINO runtime (`runtime="openvino"`; `ov-bf16` is what
  `--precision auto --runtime auto` picks on x86 CPUs with avx512_bf16/amx_bf16): the cached
  converted model, same tokens, batches and float32 pooling; int8 is NNCF's static quantisation;
- `bf16-autocast`: the fp32 model under `torch.autocast(dtype=bfloat16)` (the other way to get bf16);
- `int8-torch`: `torch.ao.quantization.quantize_dynamic`, int8 per-channel weights of every Linear,
  activations quantised per pass (VNNI through fbgemm/oneDNN);
- `ort-fp32`, `int8-ort`: the model exported to ONNX and run by ONNX Runtime, in fp32 and with
  dynamic int8 quantisation (per-channel weights, MatMul only). Need the `onnx` and `onnxruntime`
  packages; skipped with a note when they are missing.

Variants are timed alternately for `--rounds` rounds and the best round of each counts, because
the machine is shared. Printed and saved (JSON with provenance and the environment: threadpoolctl's
BLAS libraries and kernels, OPENBLAS_* variables, torch threads and build, CPU flags): sentences/s,
ratio to fp32, and min / mean cosine of each variant's embeddings to fp32's, plus each variant's
load time (conversion included when its model was not cached yet) and, with `--load-memory`, the
peak resident memory of a fresh process that loads it and encodes one sentence. Targets: the
default path >= 2.2x torch fp32 at min cosine >= 0.999 and >= 1.2x torch bf16; int8 >= 2.8x fp32
at min cosine >= 0.995.

The same run measures the ceiling (`matmul_ceiling`): torch.mm's rate at the encoder's widest
linear shape in fp32, bf16 and int8. An encoder whose time is its matrix products gains at most
the bf16/fp32 ratio of those rates; the JSON puts it beside the measured ratio.
"""

from __future__ import annotations

import contextlib
import copy
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import click
import numpy as np

from xmine.paths import REPO_ROOT, resolve_data_dir

DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "embed_speed.json"
#: FLORES-200 codes sampled: eight languages, six scripts
LANGS = ("eng_Latn", "deu_Latn", "rus_Cyrl", "zho_Hans", "arb_Arab", "hin_Deva", "jpn_Jpan", "kor_Hang")
VARIANTS = ("fp32", "bf16", "ov-fp32", "ov-bf16", "ov-int8", "bf16-autocast", "int8-torch", "ort-fp32", "int8-ort")
#: CPU flags that matter for the precisions measured here
CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_int8", "avx_vnni")


def matmul_ceiling(model, rows: int, *, seconds: float = 1.5) -> dict[str, Any]:
    """GFLOP/s (GOP/s for int8) of torch.mm at the encoder's widest linear shape, rows x hidden @
    hidden x intermediate, per precision, on torch's threads: what the encoder's products can reach.

    An encoder whose time is its matrix products cannot gain more from a precision than that
    precision's product gains (`bf16_over_fp32`). `linear_flops_per_token`: 2 x the weights of its
    Linear layers (attention's L-dependent products excluded, so achieved rates are lower bounds)."""
    import torch

    # Every token passes through each Linear of the layers; the pooler runs once per sentence.
    shapes = [m.weight.shape for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and "pooler" not in n]
    out_f, in_f = max(shapes, key=lambda s: s[0] * s[1])
    rates: dict[str, float] = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16), ("int8", torch.int8)):
        if dtype == torch.int8:
            if not hasattr(torch, "_int_mm"):
                continue
            a = torch.randint(-128, 127, (rows, in_f), dtype=torch.int8)
            b = torch.randint(-128, 127, (in_f, out_f), dtype=torch.int8)
            mm = torch._int_mm
        else:
            a, b, mm = torch.randn(rows, in_f).to(dtype), torch.randn(in_f, out_f).to(dtype), torch.mm
        for _ in range(3):
            mm(a, b)
        reps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            mm(a, b)
            reps += 1
        rates[name] = 2 * rows * in_f * out_f * reps / (time.perf_counter() - start) / 1e9
    return {"shape": [rows, int(in_f), int(out_f)], "gflops": rates,
            "bf16_over_fp32": rates["bf16"] / rates["fp32"],
            "int8_over_bf16": rates["int8"] / rates["bf16"] if "int8" in rates else None,
            "linear_flops_per_token": 2 * sum(int(s[0] * s[1]) for s in shapes)}


def sample_sentences(flores_dir: Path, per_lang: int, *, seed: int) -> tuple[list[str], list[str], list[str]]:
    """`per_lang` seeded random non-empty devtest lines of each of LANGS; (sentences, langs, files)."""
    from xmine.benchmarks.common import flores_lines

    rng = random.Random(seed)
    sentences, langs, files = [], [], []
    for code in LANGS:
        lines = [s for s in flores_lines(flores_dir, code) if s.strip()]
        picked = rng.sample(lines, min(per_lang, len(lines)))
        sentences += picked
        langs += [code] * len(picked)
        files.append(str(flores_dir / f"{code}.devtest"))
    return sentences, langs, files


def environment() -> dict[str, Any]:
    """What the speed depends on: BLAS libraries and kernels, thread settings, CPU flags, torch build."""
    import torch
    from threadpoolctl import threadpool_info

    from measure import installed_version
    from xmine.benchmarks.common import machine
    from xmine.encoders import cpu_bf16_flag, resolve_precision

    flags: set[str] = set()
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.lower().startswith(("flags", "features")):
                flags = set(line.partition(":")[2].split())
                break
    return {
        "cpu_model": machine()["cpu"],
        "cpu_flags": {f: f in flags for f in CPU_FLAGS},
        "cpu_bf16_flag": cpu_bf16_flag(),
        "auto_precision_cpu": resolve_precision("auto", "cpu"),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "torch_mkldnn": torch.backends.mkldnn.is_available(),
        "torch_quantized_engine": torch.backends.quantized.engine,
        "openvino": installed_version("openvino"), "nncf": installed_version("nncf"),
        "env": {k: v for k, v in sorted(os.environ.items())
                if k.startswith(("OPENBLAS_", "OMP_", "MKL_", "GOTO", "KMP_", "DNNL_", "ONEDNN_"))},
        "threadpoolctl": [{k: d.get(k) for k in ("user_api", "internal_api", "version", "num_threads",
                                                 "architecture", "threading_layer", "filepath")}
                          for d in threadpool_info()],
        "cores": os.cpu_count(),
    }


def _loaded_as(variant: str) -> tuple[str, str]:
    """(precision, runtime) of a variant that loads a model of its own (fp32, bf16, ov-*)."""
    return (variant[3:], "openvino") if variant.startswith("ov-") else (variant, "torch")


def load_peak_rss(precision: str, runtime: str) -> dict[str, float]:
    """Peak resident memory (MiB) and seconds of a fresh process that loads me5-small at `precision`
    on `runtime` (cached model) and encodes one sentence."""
    from measure import child_json

    code = ("import json, time; t = time.perf_counter(); from xmine.encoders import load_encoder; "
            f"e = load_encoder('me5-small', device='cpu', precision={precision!r}, runtime={runtime!r}); "
            f"e.encode(['a sentence']); import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            "from measure import rss_mb; "
            "print(json.dumps({'peak_rss_mib': rss_mb(), 'seconds': time.perf_counter() - t}))")
    return child_json([sys.executable, "-c", code])


class _OrtModel:
    """An ONNX Runtime session with the `model(input_ids=, attention_mask=).last_hidden_state` face."""

    def __init__(self, path: Path, threads: int):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def eval(self):
        return self

    def __call__(self, input_ids, attention_mask):
        import torch

        out = self.session.run(None, {"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy()})[0]
        return SimpleNamespace(last_hidden_state=torch.from_numpy(out))


def _onnx_models(model, folder: Path, threads: int) -> dict[str, _OrtModel]:
    """Export `model` to ONNX (fp32) and quantise it dynamically (int8 per-channel weights, MatMul only)."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from xmine.encoders.ov_build import hidden_state_module

    fp32_path, int8_path = folder / "model.onnx", folder / "model-int8.onnx"
    ids = torch.ones(2, 8, dtype=torch.long)
    # The exporter traces a copy: tracing has been seen to leave the traced module changed.
    torch.onnx.export(hidden_state_module(copy.deepcopy(model)), (ids, ids.clone()), str(fp32_path),
                      input_names=["input_ids", "attention_mask"], output_names=["hidden"],
                      dynamic_axes={n: {0: "batch", 1: "tokens"} for n in ("input_ids", "attention_mask", "hidden")},
                      opset_version=17, dynamo=False)
    quantize_dynamic(str(fp32_path), str(int8_path), per_channel=True, weight_type=QuantType.QInt8,
                     op_types_to_quantize=["MatMul"])
    return {"ort-fp32": _OrtModel(fp32_path, threads), "int8-ort": _OrtModel(int8_path, threads)}


@click.command("embed-speed")
@click.option("--per-lang", default=250, show_default=True, type=click.IntRange(min=2),
              help=f"Sentences per language ({len(LANGS)} languages: {', '.join(LANGS)}).")
@click.option("--rounds", default=2, show_default=True, type=click.IntRange(min=1),
              help="Timed rounds per variant, alternating; the best round of each counts.")
@click.option("--variants", default=",".join(VARIANTS), show_default=True,
              help="Comma-separated variants to time (fp32 is always included: it is the baseline).")
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1),
              help="Most sentences per forward pass (the encoder also caps tokens per pass).")
@click.option("--seed", default=0, show_default=True, help="Seed of the sentence sample.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Data root holding parallel/flores200 (default: $XMINE_DATA or ../shared/data).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=DEFAULT_OUT, show_default=True,
              help="Where to write the result as JSON (with provenance).")
@click.option("--load-memory/--no-load-memory", default=True, show_default=True,
              help="Also measure each variant's peak memory at load, in a fresh process (after the timing).")
def command(per_lang, rounds, variants, batch_size, seed, data_dir, out, load_memory):
    """Measure sentences/s and cosine to fp32 of me5-small at each precision, side by side."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from xmine.artefacts.directory import provenance
    from measure import write_speed_result
    from xmine.benchmarks.common import FLORES_DEVTEST
    from xmine.encoders import load_encoder, resolve_precision
    from xmine.encoders.runtime import encoder_runtime

    wanted = ["fp32"] + [v for v in dict.fromkeys(x.strip() for x in variants.split(",")) if v and v != "fp32"]
    unknown = [v for v in wanted if v not in VARIANTS]
    if unknown:
        raise click.BadParameter(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}",
                                 param_hint="--variants")
    flores = resolve_data_dir(data_dir, needs=str(FLORES_DEVTEST), how_to_get="See the data README (parallel/).")
    sentences, langs, files = sample_sentences(flores, per_lang, seed=seed)
    load_seconds: dict[str, float] = {}

    def timed_load(name: str):
        precision, runtime = _loaded_as(name)
        start = time.perf_counter()
        enc = load_encoder("me5-small", device="cpu", precision=precision, runtime=runtime)
        load_seconds[name] = time.perf_counter() - start
        return enc

    fp32 = timed_load("fp32")
    tokens = [len(t) for t in fp32.tokenizer([fp32.prefix + s for s in sentences])["input_ids"]]
    default_precision = resolve_precision("auto", "cpu")
    default_runtime = encoder_runtime("me5-small", "auto", default_precision, device="cpu")
    default_variant = ("ov-" if default_runtime == "openvino" else "") + default_precision
    notes: dict[str, str] = {}

    # Each variant: (encoder to run, model to put in it or None, context around encode).
    runs: dict[str, tuple[Any, Any, Callable[[], Any]]] = {"fp32": (fp32, None, contextlib.nullcontext)}
    for name in ("bf16", "ov-fp32", "ov-bf16", "ov-int8"):  # the variants with a model of their own
        if name in wanted:
            runs[name] = (timed_load(name), None, contextlib.nullcontext)
    if "bf16-autocast" in wanted:
        runs["bf16-autocast"] = (fp32, fp32.model, lambda: torch.autocast("cpu", dtype=torch.bfloat16))
    if "int8-torch" in wanted:
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        q = quantize_dynamic(copy.deepcopy(fp32.model), {torch.nn.Linear: per_channel_dynamic_qconfig},
                             dtype=torch.qint8)
        runs["int8-torch"] = (fp32, q, contextlib.nullcontext)
    tmp = tempfile.TemporaryDirectory(prefix="xmine-embed-speed-")
    if {"ort-fp32", "int8-ort"} & set(wanted):
        try:
            ort_models = _onnx_models(fp32.model, Path(tmp.name), torch.get_num_threads())
        except ImportError as e:
            notes["onnxruntime"] = f"skipped: {e} (pip install onnx onnxruntime)"
        else:
            for name, m in ort_models.items():
                if name in wanted:
                    runs[name] = (fp32, m, contextlib.nullcontext)

    def encode(name: str, xs: list[str]) -> np.ndarray:
        enc, model, ctx = runs[name]
        if model is None:
            with ctx():
                return enc.encode(xs, batch_size=batch_size)
        original = enc.model
        enc.model = model
        try:
            with ctx():
                return enc.encode(xs, batch_size=batch_size)
        finally:
            enc.model = original

    for name in runs:  # warm-up: first calls allocate and pick kernels
        encode(name, sentences[:32])
    load_start = os.getloadavg()[0]
    best = {name: float("inf") for name in runs}
    outputs: dict[str, np.ndarray] = {}
    for r in range(rounds):
        for name in runs:
            start = time.perf_counter()
            outputs[name] = encode(name, sentences)
            secs = time.perf_counter() - start
            best[name] = min(best[name], secs)
            click.echo(f"round {r + 1}: {name:>14}: {len(sentences) / secs:8.1f} sentences/s", err=True)
    tmp.cleanup()

    ceiling = matmul_ceiling(fp32.model, fp32.batching.token_budget)
    lang_arr = np.array(langs)
    results: dict[str, dict[str, Any]] = {}
    for name in runs:
        cos = np.sum(outputs[name] * outputs["fp32"], axis=1)
        results[name] = {
            "sentences_per_s": len(sentences) / best[name],
            "ratio_to_fp32": best["fp32"] / best[name],
            "min_cos_to_fp32": float(cos.min()),
            "mean_cos_to_fp32": float(cos.mean()),
            "min_cos_by_lang": {c: float(cos[lang_arr == c].min()) for c in LANGS},
            "output_dtype": str(outputs[name].dtype),
            "max_norm_error": float(np.abs(np.linalg.norm(outputs[name], axis=1) - 1).max()),
            # real tokens only (padding excluded): a lower bound of the rate the products ran at
            "linear_gflops": sum(tokens) * ceiling["linear_flops_per_token"] / best[name] / 1e9,
            "load_seconds": load_seconds.get(name),
        }
    for name in [n for n in results if n in load_seconds] if load_memory else []:
        results[name]["load_fresh_process"] = load_peak_rss(*_loaded_as(name))
    default = results.get(default_variant, results["fp32"])
    int8_best = max((n for n in results if n.startswith("int8")), key=lambda n: results[n]["sentences_per_s"],
                    default=None)
    verdict = {
        "default_precision": default_precision,
        "default_runtime": default_runtime,
        "default_variant": default_variant,
        "default_ratio_to_fp32": default["ratio_to_fp32"],
        "default_min_cos_to_fp32": default["min_cos_to_fp32"],
        "default_meets_target": bool(default["ratio_to_fp32"] >= 2.2 and default["min_cos_to_fp32"] >= 0.999),
    }
    if "bf16" in results:
        verdict["default_ratio_to_torch_bf16"] = default["sentences_per_s"] / results["bf16"]["sentences_per_s"]
        verdict["default_meets_bf16_target"] = bool(verdict["default_ratio_to_torch_bf16"] >= 1.2)
    if int8_best and "bf16" in results:
        i8 = results[int8_best]
        verdict["best_int8"] = int8_best
        verdict["int8_worth_keeping"] = bool(i8["sentences_per_s"] > results["bf16"]["sentences_per_s"]
                                             and i8["min_cos_to_fp32"] >= 0.995)
    if "ov-int8" in results:
        verdict["int8_meets_target"] = bool(results["ov-int8"]["ratio_to_fp32"] >= 2.8
                                            and results["ov-int8"]["min_cos_to_fp32"] >= 0.995)
    verdict["ceiling_bf16_over_fp32"] = ceiling["bf16_over_fp32"]
    result = {
        "n_sentences": len(sentences), "languages": list(LANGS), "matmul_ceiling": ceiling,
        "tokens_mean": float(np.mean(tokens)), "tokens_max": int(np.max(tokens)),
        "variants": results, "verdict": verdict, "notes": notes,
        "table": {"columns": ["variant", "sentences/s", "x fp32", "min cos to fp32", "mean cos to fp32"],
                  "rows": [[n, r["sentences_per_s"], r["ratio_to_fp32"], r["min_cos_to_fp32"], r["mean_cos_to_fp32"]]
                           for n, r in results.items()]},
        "environment": environment(),
        "load_average_1min": {"start": load_start, "end": os.getloadavg()[0]},
    }
    result["provenance"] = provenance(
        benchmark="embed_speed", encoder=fp32.fingerprint(), per_lang=per_lang, seed=seed, rounds=rounds,
        batch_size=batch_size, variants=list(runs), data_files=files,
    )
    write_speed_result(out, result, benchmark="embed_speed")
    width = max(len(n) for n in results)
    lines = [f"{'variant':<{width}}  sentences/s  x fp32  min cos   mean cos"]
    lines += [f"{n:<{width}}  {r['sentences_per_s']:11.1f}  {r['ratio_to_fp32']:6.2f}  {r['min_cos_to_fp32']:.5f}  "
              f"{r['mean_cos_to_fp32']:.6f}" for n, r in results.items()]
    lines.append(f"default (auto) on this CPU: {default_variant}: {verdict['default_ratio_to_fp32']:.2f}x fp32, "
                 f"min cos {verdict['default_min_cos_to_fp32']:.5f} (target >= 2.2x, >= 0.999)"
                 + (f", {verdict['default_ratio_to_torch_bf16']:.2f}x torch bf16 (target >= 1.2x)"
                    if "default_ratio_to_torch_bf16" in verdict else ""))
    if "int8_meets_target" in verdict:
        lines.append(f"ov-int8: {results['ov-int8']['ratio_to_fp32']:.2f}x fp32, min cos "
                     f"{results['ov-int8']['min_cos_to_fp32']:.5f} (target >= 2.8x, >= 0.995)")
    lines += [f"load {n}: {r['load_fresh_process']['seconds']:.1f} s, peak {r['load_fresh_process']['peak_rss_mib']:.0f} MiB"
              for n, r in results.items() if "load_fresh_process" in r]
    g = ceiling["gflops"]
    lines.append(f"torch.mm at the encoder's widest shape {ceiling['shape']}: " + ", ".join(
        f"{k} {v:.0f} G{'OP' if k == 'int8' else 'FLOP'}/s" for k, v in g.items())
        + f": bf16 can gain at most {ceiling['bf16_over_fp32']:.2f}x over fp32 on this CPU; the encoder's "
        "linear layers ran at " + ", ".join(f"{n} {r['linear_gflops']:.0f}" for n, r in results.items()
                                            if n in ("fp32", "bf16")) + " GFLOP/s")
    if "int8_worth_keeping" in verdict:
        lines.append(f"int8 ({verdict['best_int8']}) faster than bf16 at min cos >= 0.995: {verdict['int8_worth_keeping']}")
    lines += [f"note: {k}: {v}" for k, v in notes.items()]
    lines.append(f"({len(sentences)} sentences, {result['tokens_mean']:.1f} tokens on average; torch threads "
                 f"{torch.get_num_threads()}; load average {load_start:.1f} -> {os.getloadavg()[0]:.1f} on "
                 f"{os.cpu_count()} cores) -> {out}")
    click.echo("\n".join(lines))

