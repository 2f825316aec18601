"""Converted OpenVINO models of transformer encoders, built once and cached beside the rebuilt me5-small.

`ensure_openvino_model(...)` returns the OpenVINO encoder of the folder
`$XMINE_HOME/models/<stem>-openvino-<precision>-<key>/` (`model.xml`, `model.bin`, `manifest.json`),
building the folder on first use:

1. the torch fp32 model (the encoder's `TokenBatchedEncoder`) encodes the probe set
   (`PROBE_SENTENCES`, real sentences in ten scripts; below): the reference, taken before any
   OpenVINO model is compiled, whose worker threads would compete with torch's;
2. the same torch model is converted by `openvino.convert_model(model, example_input=...)` with
   dynamic batch and length; its one output is the last hidden state (pooling stays in numpy
   float32, as torch's path pools);
3. for int8, NNCF quantises it (`quantize`; below);
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

The probe set: Articles 1 and 3 of the Universal Declaration of Human Rights in the United
Nations' official translations (Latin, Cyrillic, Han, Arabic, Devanagari, Japanese, Hangul, Greek,
Hebrew, Thai), plus longer sentences of the same texts, so that both short and long passes are
compared. Kept in the package, so that the check at conversion needs no data download.

int8 is NNCF static post-training quantisation of the converted model.

Calibration: `CALIBRATION_SENTENCES` sentences drawn with a fixed seed from a source that the speed
benchmarks never time: by default every file of WMT newstest 2020 (`parallel/wmt-newstest/2020/` in
the data folder: news in Latin, Cyrillic, Han, Japanese, Khmer, Pashto (Arabic script), Tamil
and Inuktitut syllabics), or the UTF-8 text file named by `$XMINE_INT8_CALIBRATION` (one sentence
per line). They are tokenized and batched exactly as the encoder batches (the encoder's prefix,
length-sorted passes of its token budget), so activation ranges are those of real passes.

Quantisation: `nncf.quantize` with `ModelType.TRANSFORMER` (SmoothQuant on the matrix products,
attention's softmax path kept in floating point) and the MIXED preset (symmetric weights,
asymmetric activations), without NNCF's bias correction: on the probe set and on FLORES-200 in
eight scripts it changed no embedding's cosine to fp32 by more than 0.0001, and it costs a
second statistics pass (a quarter of the calibration's time). What the drawn sentences were is
recorded in the model's manifest.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import random
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from xmine.artefacts.directory import provenance
from xmine.encoders.base import check_finite_output, quiet_logger
from xmine.encoders.batching import token_batches
from xmine.encoders.e5_q4 import build_cached_model, models_dir
from xmine.encoders.precision import MIN_COSINE, cpu_bf16_flag
from xmine.encoders.runtime import require_openvino, without_telemetry
from xmine.encoders.tokens import token_ids
from xmine.artefacts.fileio import MANIFEST, load_manifest, sha256_file, write_manifest
from xmine.errors import ArtefactError, EncoderError
from xmine.paths import default_data_dir

log = logging.getLogger(__name__)

#: Bump when the conversion recipe changes; part of the folder's key.
OV_RECIPE = 1
MODEL_KIND = "openvino-model"
FILES = ("model.xml", "model.bin")
CALIBRATION_SENTENCES = 320
CALIBRATION_SEED = 0
#: the default calibration source, inside the data folder
CALIBRATION_SOURCE = "parallel/wmt-newstest/2020"
CALIBRATION_ENV = "XMINE_INT8_CALIBRATION"
#: the probe set (see the module doc)
PROBE_SENTENCES = (
    "All human beings are born free and equal in dignity and rights. They are endowed with reason and "
    "conscience and should act towards one another in a spirit of brotherhood.",
    "Everyone has the right to life, liberty and security of person.",
    "Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft und Gewissen "
    "begabt und sollen einander im Geist der Brüderlichkeit begegnen.",
    "Jeder hat das Recht auf Leben, Freiheit und Sicherheit der Person.",
    "Tous les êtres humains naissent libres et égaux en dignité et en droits. Ils sont doués de raison et "
    "de conscience et doivent agir les uns envers les autres dans un esprit de fraternité.",
    "Tout individu a droit à la vie, à la liberté et à la sûreté de sa personne.",
    "Todos los seres humanos nacen libres e iguales en dignidad y derechos y, dotados como están de razón "
    "y conciencia, deben comportarse fraternalmente los unos con los otros.",
    "Все люди рождаются свободными и равными в своем достоинстве и правах. Они наделены разумом и совестью "
    "и должны поступать в отношении друг друга в духе братства.",
    "Каждый человек имеет право на жизнь, на свободу и на личную неприкосновенность.",
    "人人生而自由,在尊严和权利上一律平等。他们赋有理性和良心,并应以兄弟关系的精神相对待。",
    "人人有权享有生命、自由和人身安全。",
    "يولد جميع الناس أحرارًا متساوين في الكرامة والحقوق. وقد وهبوا عقلاً وضميرًا وعليهم أن يعامل بعضهم بعضًا بروح الإخاء.",
    "لكل فرد الحق في الحياة والحرية وسلامة شخصه.",
    "सभी मनुष्यों को गौरव और अधिकारों के मामले में जन्मजात स्वतन्त्रता और समानता प्राप्त है। उन्हें बुद्धि और "
    "अन्तरात्मा की देन प्राप्त है और परस्पर उन्हें भाईचारे के भाव से बर्ताव करना चाहिए।",
    "すべての人間は、生まれながらにして自由であり、かつ、尊厳と権利とについて平等である。人間は、理性と良心とを"
    "授けられており、互いに同胞の精神をもって行動しなければならない。",
    "すべて人は、生命、自由及び身体の安全に対する権利を有する。",
    "모든 인간은 태어날 때부터 자유로우며 그 존엄과 권리에 있어 동등하다. 인간은 천부적으로 이성과 양심을 "
    "부여받았으며 서로 형제애의 정신으로 행동하여야 한다.",
    "모든 사람은 생명과 신체의 자유와 안전에 대한 권리를 가진다.",
    "Όλοι οι άνθρωποι γεννιούνται ελεύθεροι και ίσοι στην αξιοπρέπεια και τα δικαιώματα. Είναι προικισμένοι "
    "με λογική και συνείδηση, και οφείλουν να συμπεριφέρονται μεταξύ τους με πνεύμα αδελφοσύνης.",
    "כל בני אדם נולדו בני חורין ושווים בערכם ובזכויותיהם. כולם חוננו בתבונה ובמצפון, לפיכך חובה עליהם "
    "לנהוג איש ברעהו ברוח של אחוה.",
    "มนุษย์ทั้งหลายเกิดมามีอิสระและเสมอภาคกันในเกียรติศักดิ์และสิทธิ ต่างมีเหตุผลและมโนธรรม "
    "และควรปฏิบัติต่อกันด้วยเจตนารมณ์แห่งภราดรภาพ",
    "Tutti gli esseri umani nascono liberi ed eguali in dignità e diritti.",
    "Wszyscy ludzie rodzą się wolni i równi pod względem swej godności i swych praw.",
    "Tüm insanlar hür, haysiyet ve haklar bakımından eşit doğarlar.",
)


def ov_config(precision: str, threads: int) -> dict[str, Any]:
    """Compile settings: the inference precision, one stream of `threads` threads, latency mode.

    int8 runs its quantised products in int8 and the rest in bf16 where the CPU has native bf16,
    else f32. Threads are not pinned to cores: OpenVINO pins each process's threads from the
    first core, so one-thread encoder actors on one machine (`embed --ray`) would share a core.
    """
    hint = {"fp32": "f32", "bf16": "bf16"}.get(precision, "bf16" if cpu_bf16_flag() else "f32")
    return {"INFERENCE_PRECISION_HINT": hint, "INFERENCE_NUM_THREADS": int(threads), "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False}


def check_compiled_precision(asked: str, compiled: Any, *, model: Path) -> None:
    """Refuse a compiled model whose inference precision is not the one asked for: OpenVINO's CPU
    plugin compiles a bf16 hint as f32 on a CPU without native bf16, and the store would then hold
    fp32 vectors labelled bf16 (torch, by contrast, emulates bf16). `compiled`: the compiled
    model's `INFERENCE_PRECISION_HINT` (an OpenVINO element type or its name)."""
    if asked != "bf16":
        return
    name = str(getattr(compiled, "type_name", compiled)).lower()
    if "bf16" not in name and "bfloat16" not in name:
        raise EncoderError(f"{model}: OpenVINO compiles --precision bf16 as {name} on this CPU (no native bf16); "
                           "use --precision fp32, or --runtime torch, which emulates bf16")


def model_source(*, weights_id: str, precision: str) -> dict[str, Any]:
    """What a converted model is made from; equal sources = interchangeable models."""
    openvino = require_openvino()

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
        if not (folder / MANIFEST).is_file():
            return "absent"
        manifest = load_manifest(folder / MANIFEST)
    except ArtefactError as e:
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
    ov = require_openvino()
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
    manifest = load_manifest(target / MANIFEST)
    if checked is None:  # cached already (or built meanwhile by another process)
        return make(target), manifest
    checked.model_xml = target / "model.xml"  # compiled from the staging copy of these very files
    log.info("%s: OpenVINO %s model built in %.0f s (probe min cosine to torch fp32 %.5f) -> %s", manifest["name"],
             precision, manifest["build_seconds"], manifest["check"]["min_cos_to_torch_fp32"], target)
    return checked, manifest


def _build(folder: Path, *, source, precision, torch_fp32, make_encoder) -> Any:
    """Convert, check and write the model into `folder` (see the module doc); the checked encoder."""
    ov = require_openvino()

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
    check_finite_output(expected, reference, lambda i: f"probe sentence {PROBE_SENTENCES[i]!r}")  # (was: "cosine nan")
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
                           "it: use " + ("--precision bf16 or fp32 (int8 runs on OpenVINO only)" if precision == "int8"
                                         else "--runtime torch"))
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


def _nncf():
    without_telemetry()
    try:
        import nncf
    except ImportError as e:
        raise EncoderError(f"precision int8 needs the nncf package to build its model ({e}): pip install nncf") from None
    return nncf


def calibration_recipe() -> dict[str, Any]:
    """How the int8 model is made (part of its cache key): nncf version, preset, source, draw."""
    nncf = _nncf()
    env = os.environ.get(CALIBRATION_ENV)
    return {"nncf": nncf.__version__, "preset": "mixed", "model_type": "transformer",
            "source": f"${CALIBRATION_ENV}={env}" if env else CALIBRATION_SOURCE, "sentences": CALIBRATION_SENTENCES,
            "seed": CALIBRATION_SEED, "bias_correction": False}


def calibration_files() -> list[Path]:
    """The calibration source's text files (EncoderError in one line when there are none)."""
    env = os.environ.get(CALIBRATION_ENV)
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise EncoderError(f"${CALIBRATION_ENV}={env}: no such file (one calibration sentence per line)")
        return [path]

    root = default_data_dir()
    folder = root / CALIBRATION_SOURCE if root else None
    files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder and folder.is_dir() else []
    if not files:
        raise EncoderError(f"precision int8: no calibration sentences: {CALIBRATION_SOURCE} is not in the data folder "
                           f"({root or 'no $XMINE_DATA, no ../shared/data'}); set ${CALIBRATION_ENV} to a text file of "
                           "a few hundred sentences in your languages")
    return files


def draw_calibration() -> tuple[list[str], dict[str, Any]]:
    """The seeded draw of calibration sentences and a record of it (files with sha256, count, seed)."""
    files = calibration_files()
    lines: list[str] = []
    for f in files:
        try:
            lines += [s.strip() for s in f.read_text(encoding="utf-8").splitlines() if s.strip()]
        except (OSError, UnicodeDecodeError) as e:
            raise EncoderError(f"{f}: cannot read calibration sentences ({e})") from None
    if len(lines) < CALIBRATION_SENTENCES // 4:
        raise EncoderError(f"{files[0]}: only {len(lines)} calibration sentences; at least "
                           f"{CALIBRATION_SENTENCES // 4} are needed")
    picked = random.Random(CALIBRATION_SEED).sample(lines, min(CALIBRATION_SENTENCES, len(lines)))
    digest = hashlib.sha256("\n".join(picked).encode()).hexdigest()
    record = {"files": [{"path": str(f), "sha256": sha256_file(f)} for f in files], "sentences": len(picked),
              "seed": CALIBRATION_SEED, "sentences_sha256": digest}
    return picked, record


def quantize(model, reference) -> tuple[Any, dict[str, Any]]:
    """(the int8 `openvino.Model` of the float `model`, the calibration record); `reference` is the
    torch encoder whose tokenizer, prefix and batching make the calibration passes."""
    nncf = _nncf()
    sentences, record = draw_calibration()
    ids = token_ids(reference, sentences)
    passes = [{"input_ids": i, "attention_mask": m}
              for _, i, m in token_batches(ids, pad_id=reference._pad_id,
                                           token_budget=reference.batching.token_budget, max_rows=64)]
    with quiet_logger("nncf", logging.WARNING):  # its per-step INFO lines and progress bars
        quantized = nncf.quantize(model, nncf.Dataset(passes), preset=nncf.QuantizationPreset.MIXED,
                                  model_type=nncf.ModelType.TRANSFORMER, subset_size=len(passes),
                                  advanced_parameters=nncf.AdvancedQuantizationParameters(disable_bias_correction=True))
    record["passes"] = len(passes)
    return quantized, record
