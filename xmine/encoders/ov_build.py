"""Converted OpenVINO models of transformer encoders, built once and cached beside the rebuilt me5-small.

`ensure_openvino_model(...)` returns the OpenVINO encoder of the folder
`$XMINE_HOME/models/<stem>-openvino-<precision>-<key>/` (`model.xml`, `model.bin`, `manifest.json`),
building the folder on first use:

1. the torch fp32 model (the encoder's `TokenBatchedEncoder`) encodes the probe set
   (`xmine.encoders.probe`, real sentences in ten scripts): the reference, taken before any
   OpenVINO model is compiled, whose worker threads would compete with torch's;
2. the same torch model is converted by `openvino.convert_model(model, example_input=...)` with
   dynamic batch and length; its one output is the last hidden state (pooling stays in numpy
   float32, as torch's path pools);
3. for int8, NNCF quantises it (`xmine.encoders.ov_int8`);
4. the model is saved, the torch model released (the converted one shares its weights until
   saved), and the saved files compiled at the precision and checked against the reference:
   the minimum cosine must reach `MIN_COSINE[precision]`, else an EncoderError in one line and
   nothing is cached; the encoder compiled for the check is the one handed back, so a first use
   compiles once;
5. the folder is written in a temporary directory and renamed into place under a file lock (as
   `e5_q4.build_cached_model` does for me5-small), with a manifest holding the sha256 of both files, what the
   model was made from (`source`), the check's result and the seconds each build step took.

`<key>` hashes `source` (the weights' identity, the openvino version, the recipe, the precision
and, for int8, nncf's version and the calibration draw). Opening a cached folder re-checks its
manifest: a model whose files do not match their hashes (broken) or whose source differs from the
one wanted (stale) is rebuilt, with a one-line warning.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from xmine.artefacts.directory import provenance
from xmine.encoders.base import quiet_logger
from xmine.encoders.e5_q4 import build_cached_model, models_dir
from xmine.encoders.ov_int8 import calibration_recipe, quantize
from xmine.encoders.precision import cpu_bf16_flag
from xmine.encoders.probe import PROBE_SENTENCES
from xmine.artefacts.fileio import MANIFEST, sha256_file, write_manifest
from xmine.errors import EncoderError

log = logging.getLogger(__name__)

#: Bump when the conversion recipe changes; part of the folder's key.
OV_RECIPE = 1
MODEL_KIND = "openvino-model"
FILES = ("model.xml", "model.bin")
#: least cosine to torch fp32 on the probe set for the converted model to be used
MIN_COSINE = {"fp32": 0.9999, "bf16": 0.999, "int8": 0.995}


def ov_config(precision: str, threads: int) -> dict[str, Any]:
    """Compile settings: the inference precision, one stream of `threads` threads, latency mode.

    int8 runs its quantised products in int8 and the rest in bf16 where the CPU has native bf16,
    else f32. Threads are not pinned to cores: OpenVINO pins each process's threads from the
    first core, so one-thread encoder actors on one machine (`embed --ray`) would share a core.
    """
    hint = {"fp32": "f32", "bf16": "bf16"}.get(precision, "bf16" if cpu_bf16_flag() else "f32")
    return {"INFERENCE_PRECISION_HINT": hint, "INFERENCE_NUM_THREADS": int(threads), "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False}


def model_source(*, weights_id: str, precision: str) -> dict[str, Any]:
    """What a converted model is made from; equal sources = interchangeable models."""
    import openvino

    source = {"weights_id": weights_id, "precision": precision, "openvino": openvino.__version__,
              "recipe": OV_RECIPE}
    if precision == "int8":
        source["int8"] = calibration_recipe()
    return source


def source_key(source: dict[str, Any]) -> str:
    """12 hex digits naming what a converted model is made from (`model_source`): part of its
    folder's name and of the fingerprint of the encoder that runs it, so embeddings of another
    build (another openvino, recipe or int8 draw) are another encoder's, never mixed or reused."""
    return hashlib.sha256(json.dumps(source, sort_keys=True).encode()).hexdigest()[:12]


def build_key(*, weights_id: str, precision: str) -> str:
    """`source_key` of the model converted from `weights_id` at `precision`, known without it."""
    return source_key(model_source(weights_id=weights_id, precision=precision))


def problem_with(folder: Path, source: dict[str, Any]) -> str | None:
    """Why the cached model in `folder` cannot be used (None: it can): absent, stale or broken."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "absent"
    except (OSError, ValueError) as e:
        return f"unreadable manifest ({e})"
    if manifest.get("kind") != MODEL_KIND or manifest.get("source") != source:
        return "stale: made from another source than the one wanted"
    files = manifest.get("files") or {}
    for name in FILES:
        path = folder / name
        want = files.get(name) or {}
        if not path.is_file():
            return f"broken: {name} is missing"
        if path.stat().st_size != want.get("size") or sha256_file(path) != want.get("sha256"):
            return f"broken: {name} does not match the sha256 in its manifest"
    return None


def hidden_state_module(model):
    """`model` (a transformers encoder) as a module of (input_ids, attention_mask) -> last hidden
    state, the form OpenVINO's and ONNX's exporters take."""
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    return LastHiddenState(model).eval()


def convert(torch_encoder) -> Any:
    """The float32 `openvino.Model` of a torch fp32 `TokenBatchedEncoder`'s transformer (dynamic shapes)."""
    import openvino as ov
    import torch

    example = {"input_ids": torch.ones(2, 8, dtype=torch.long), "attention_mask": torch.ones(2, 8, dtype=torch.long)}
    # transformers' warnings off: tracing reads every property of the model, `loss_function` among
    # them, and an encoder has no loss: transformers then warns "`loss_type=None` was set in the
    # config but it is unrecognized" on every first build, about training, which an encoder never does.
    with warnings.catch_warnings(), quiet_logger("transformers", logging.ERROR):
        # Tracing notes that Python booleans become constants; the ones in BERT's mask code are
        # constant for every shape (no cache, no causal mask). The probe check below verifies it.
        warnings.simplefilter("ignore")
        return ov.convert_model(hidden_state_module(torch_encoder.model), example_input=example,
                                input=[("input_ids", [-1, -1], ov.Type.i64), ("attention_mask", [-1, -1], ov.Type.i64)])


def ensure_openvino_model(*, stem: str, weights_id: str, precision: str, torch_fp32: Callable[[], Any],
                          make_encoder: Callable[[Path], Any]) -> tuple[Any, dict[str, Any]]:
    """The OpenVINO encoder of the cached converted model and its manifest; the model is built (and
    checked) first if absent, stale or broken.

    `torch_fp32()` gives the torch fp32 `TokenBatchedEncoder` of the same weights (called only to
    build); `make_encoder(folder, build)` gives the OpenVINO encoder (with a `model_xml` attribute)
    of a folder holding `model.xml`, `build` the model's `source_key`. A model just built is handed
    back as the encoder its probe check compiled, its `model_xml` pointed at the final folder (the
    files were only renamed).
    """
    source = model_source(weights_id=weights_id, precision=precision)
    target = models_dir() / f"{stem}-openvino-{source['precision']}-{source_key(source)}"
    make = functools.partial(make_encoder, build=source_key(source))

    def ready() -> bool:
        why = problem_with(target, source)
        if why not in (None, "absent"):
            log.warning("%s: %s; rebuilding it", target, why)
        return why is None

    checked = None
    if problem_with(target, source) is not None:
        checked = build_cached_model(target, ready, functools.partial(
            _build, source=source, precision=precision, torch_fp32=torch_fp32, make_encoder=make))
    manifest = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
    if checked is None:  # cached already (or built meanwhile by another process)
        return make(target), manifest
    checked.model_xml = target / "model.xml"  # compiled from the staging copy of these very files
    log.info("%s: OpenVINO %s model built in %.0f s (probe min cosine to torch fp32 %.5f) -> %s", manifest["name"],
             precision, manifest["build_seconds"], manifest["check"]["min_cos_to_torch_fp32"], target)
    return checked, manifest


def _build(folder: Path, *, source, precision, torch_fp32, make_encoder) -> Any:
    """Convert, check and write the model into `folder` (see the module doc); the checked encoder."""
    import openvino as ov

    steps: dict[str, float] = {}
    start = last = time.perf_counter()

    def step(name: str) -> None:
        nonlocal last
        now = time.perf_counter()
        steps[name] = round(now - last, 2)
        last = now

    reference = torch_fp32()
    name = reference.name
    step("load_torch_fp32")
    expected = reference.encode(list(PROBE_SENTENCES))
    step("probe_torch_fp32")
    model = convert(reference)
    step("convert")
    calibration = None
    if precision == "int8":
        model, calibration = quantize(model, reference)
        step("quantize")
    folder.mkdir(parents=True)
    ov.save_model(model, str(folder / "model.xml"), compress_to_fp16=False)
    step("save")
    # The converted model shares the torch weights until saved: release both before compiling,
    # so that the peak holds one copy of the weights beside the compiled model, not three.
    del model, reference
    encoder = make_encoder(folder)
    step("compile")
    min_cos = float(np.min(np.sum(encoder.encode(list(PROBE_SENTENCES)) * expected, axis=1)))  # least cosine
    step("probe_openvino")
    if not min_cos >= MIN_COSINE[precision]:
        raise EncoderError(f"{name}: the OpenVINO {precision} model agrees with torch fp32 only to cosine "
                           f"{min_cos:.5f} on the probe sentences (needs >= {MIN_COSINE[precision]}); not using "
                           "it: use --runtime torch")
    for f in folder.rglob("*"):
        f.chmod(0o644)
    folder.chmod(0o755)
    files = {n: {"size": (folder / n).stat().st_size, "sha256": sha256_file(folder / n)} for n in FILES}
    step("hash")
    write_manifest(folder, MODEL_KIND, {
        "name": name,
        "source": source,
        "files": files,
        "check": {"probe_sentences": len(PROBE_SENTENCES), "min_cos_to_torch_fp32": min_cos,
                  "threshold": MIN_COSINE[precision]},
        "calibration": calibration,
        "build_seconds": round(time.perf_counter() - start, 1),
        "build_steps_seconds": steps,
        "provenance": provenance(recipe=OV_RECIPE, precision=precision),
    })
    return encoder
