"""The runtime that runs a transformer encoder's forward pass: torch or OpenVINO.

- `torch`: eager PyTorch (`TokenBatchedEncoder`), every device, precisions fp32/bf16/fp16.
- `openvino`: the same model converted once to OpenVINO IR and compiled by its CPU plugin (fused
  attention and matrix-product kernels; `xmine.encoders.ov_encoder`). CPU only; precisions fp32,
  bf16 (`INFERENCE_PRECISION_HINT`) and int8 (NNCF post-training quantisation, `ov_build`).
  Tokenisation, length-sorted token batches and float32 pooling are torch's, unchanged.
- `auto` (default): openvino for transformer encoders on an x86 CPU when the `openvino` package
  is installed (and the precision is one it runs), torch everywhere else (CUDA, other CPUs,
  use-m3). Where openvino is missing, `auto` says once that it falls back to torch.

A command passes the `--runtime` the user gave on with the precision (`EncoderConfig`);
`load_encoder(runtime=None)` means auto. Commands that meet earlier artefacts (stores, indexes)
use the artefacts' runtime when none was asked for (`runtime_for_artefact`), as they do for the
precision.
"""

from __future__ import annotations

import logging
import platform
import sys
from importlib.util import find_spec

from xmine.encoders.base import RUNTIMES, note_once
from xmine.errors import EncoderError
from xmine.artefacts.records import EncoderFingerprint

log = logging.getLogger(__name__)

DEFAULT_RUNTIME = "auto"
#: precisions each concrete runtime runs
RUNTIME_PRECISIONS = {"torch": ("fp32", "bf16", "fp16"), "openvino": ("fp32", "bf16", "int8")}

def runtime_for_artefact(fingerprint: EncoderFingerprint | None, asked: str | None) -> str | None:
    """The runtime to encode with beside an artefact of `fingerprint`: the one `asked` for, else the
    artefact's own (so text encoded next to a store or an index matches it), else None (auto)."""
    return asked if asked is not None or fingerprint is None else fingerprint.id.runtime


def openvino_installed() -> bool:
    """Whether the `openvino` package can be imported here."""
    try:
        return find_spec("openvino") is not None
    except (ImportError, ValueError):
        return False


def without_telemetry() -> None:
    """Keep OpenVINO's usage telemetry out of xmine's runs. Importing `openvino` imports its tools'
    telemetry, which writes ~/intel and, where the user has not opted out, sends usage data (opt-out,
    not opt-in). A command writes only what it was asked to write: OpenVINO and NNCF then use the stub
    they use where `openvino-telemetry` is not installed (a process that imported the package itself
    keeps it). Called before each import of openvino or nncf."""
    sys.modules.setdefault("openvino_telemetry", None)


def require_openvino():
    """The imported `openvino` module, or an EncoderError in one line saying how to get it."""
    without_telemetry()
    try:
        import openvino
    except ImportError as e:
        raise EncoderError(f"--runtime openvino: the openvino package cannot be imported here ({e}); "
                           "pip install openvino, or use --runtime torch") from None
    return openvino


def x86_cpu() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")


def encoder_runtime(name: str, runtime: str | None, precision: str, *, device: str) -> str:
    """The concrete runtime ("torch" or "openvino") that `runtime` means for encoder `name` at
    concrete `precision` on `device` (see the module doc). Decided without loading the model.

    An explicit runtime that cannot run here (openvino not installed, on a GPU, for use-m3, or
    at a precision it lacks; int8 asked of torch) is an EncoderError, never a silent change.
    """
    runtime = runtime or DEFAULT_RUNTIME
    if runtime not in RUNTIMES:
        raise EncoderError(f"runtime must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
    kind = device.split(":", 1)[0]
    if name == "use-m3":
        if runtime == "openvino":
            raise EncoderError("use-m3 runs in numpy; --runtime openvino is for transformer encoders")
        return "torch"  # nominal: its fingerprint carries no runtime
    if runtime == "torch":
        if precision == "int8":
            raise EncoderError("precision int8 runs on OpenVINO only: use --runtime openvino (or auto), "
                               "not --runtime torch")
        return "torch"
    if runtime == "openvino":
        if kind != "cpu":
            raise EncoderError(f"--runtime openvino runs on the CPU; {device} is not (use --device cpu or --runtime torch)")
        if precision not in RUNTIME_PRECISIONS["openvino"]:
            raise EncoderError(f"--runtime openvino runs precision fp32, bf16 or int8, not {precision}")
        require_openvino()
        return "openvino"
    # auto
    if precision == "int8":
        require_openvino()
        return "openvino"
    if kind != "cpu" or not x86_cpu() or precision not in RUNTIME_PRECISIONS["openvino"]:
        return "torch"
    if not openvino_installed():
        note_once(("runtime-fallback",), "--runtime auto: the openvino package is not installed, so %s runs on "
                   "torch (pip install openvino for the faster CPU path)", name)
        return "torch"
    return "openvino"
