"""int8 for the OpenVINO runtime: NNCF static post-training quantisation of the converted model.

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

import hashlib
import logging
import os
import random
from pathlib import Path
from typing import Any

from xmine.encoders.base import quiet_logger
from xmine.encoders.batching import token_batches
from xmine.encoders.tokens import token_ids
from xmine.errors import EncoderError
from xmine.artefacts.fileio import sha256_file
from xmine.paths import default_data_dir

CALIBRATION_SENTENCES = 320
CALIBRATION_SEED = 0
#: the default calibration source, inside the data folder
DEFAULT_SOURCE = "parallel/wmt-newstest/2020"
ENV = "XMINE_INT8_CALIBRATION"


def _nncf():
    try:
        import nncf
    except ImportError as e:
        raise EncoderError(f"precision int8 needs the nncf package to build its model ({e}): pip install nncf") from None
    return nncf


def calibration_recipe() -> dict[str, Any]:
    """How the int8 model is made (part of its cache key): nncf version, preset, source, draw."""
    nncf = _nncf()
    env = os.environ.get(ENV)
    return {"nncf": nncf.__version__, "preset": "mixed", "model_type": "transformer",
            "source": f"${ENV}={env}" if env else DEFAULT_SOURCE, "sentences": CALIBRATION_SENTENCES,
            "seed": CALIBRATION_SEED, "bias_correction": False}


def calibration_files() -> list[Path]:
    """The calibration source's text files (EncoderError in one line when there are none)."""
    env = os.environ.get(ENV)
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise EncoderError(f"${ENV}={env}: no such file (one calibration sentence per line)")
        return [path]

    root = default_data_dir()
    folder = root / DEFAULT_SOURCE if root else None
    files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder and folder.is_dir() else []
    if not files:
        raise EncoderError(f"precision int8: no calibration sentences: {DEFAULT_SOURCE} is not in the data folder "
                           f"({root or 'no $XMINE_DATA, no ../shared/data'}); set ${ENV} to a text file of "
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
