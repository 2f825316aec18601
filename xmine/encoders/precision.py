"""Precisions and fingerprints: what `auto` means on a device, how a fingerprint records the
precision and runtime an encoder ran at, and the one rule for mixing them (`check_same_encoder`,
`check_projection_encoder`); see `xmine.encoders` for the rule in words."""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from typing import Any

from xmine.encoders.base import PRECISIONS, note_once

log = logging.getLogger("xmine.encoders")  # (the package's logger: one name for every encoder message)

_PRECISION_TAG = re.compile(r"\|precision=([a-z0-9]+)(?=(\|runtime=[a-z0-9]+)?$)")
_RUNTIME_TAG = re.compile(r"\|runtime=([a-z0-9]+)$")


@lru_cache(maxsize=1)
def cpu_bf16_flag() -> str | None:
    """The CPU feature that makes bf16 fast here, or None: "amx_bf16" or "avx512_bf16" (x86), "bf16" (aarch64).

    Read from the `flags` (x86) or `Features` (aarch64) line of /proc/cpuinfo: torch reports only
    the vector width it dispatches to (`torch.backends.cpu.get_cpu_capability()` says "AVX512" on
    CPUs with and without bf16 instructions), and oneDNN runs bf16 even without them, emulated
    and slower than fp32. Where /proc/cpuinfo does not exist (macOS, Windows), None.
    """
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    return bf16_flag_in_cpuinfo(text, platform.machine())


def bf16_flag_in_cpuinfo(cpuinfo: str, machine: str) -> str | None:
    """`cpu_bf16_flag` on the text of a /proc/cpuinfo and a `platform.machine()` value."""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("flags", "features"):
            flags = set(value.split())
            break
    for flag in ("amx_bf16", "avx512_bf16"):
        if flag in flags:
            return flag
    if machine.lower() in ("aarch64", "arm64") and "bf16" in flags:
        return "bf16"
    return None


def resolve_precision(precision: str, device: str, *, encoder_name: str = "") -> str:
    """The concrete precision ("fp32", "bf16" or "fp16") that `precision` means on `device`.

    "auto": on a CPU, bf16 when `cpu_bf16_flag()` finds native bf16 instructions, else fp32; on
    CUDA, bf16 when the GPU supports it (`torch.cuda.is_bf16_supported()`), else fp16; on any
    other device, fp32. An explicit precision the device cannot run (bf16 on a CUDA GPU without
    it) is an EncoderError, never a silent change; bf16 on a CPU without native bf16 and fp16 on
    a CPU run (emulated) with a warning, since the user asked for them.
    """
    from xmine.errors import EncoderError

    if precision not in PRECISIONS:
        raise EncoderError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    kind = device.split(":", 1)[0]
    if precision == "int8" and kind != "cpu":
        raise EncoderError(f"{encoder_name or 'encoder'}: precision int8 runs on the CPU (OpenVINO) only, not on {device}")
    if kind == "cuda":
        import torch

        bf16_ok = torch.cuda.is_bf16_supported()
        if precision == "auto":
            chosen = "bf16" if bf16_ok else "fp16"
            note_once(("auto-cuda", chosen), "%s runs at %s on %s (--precision auto)", encoder_name or "the encoder",
                       chosen, device)
            return chosen
        if precision == "bf16" and not bf16_ok:
            raise EncoderError(f"{encoder_name or 'encoder'}: precision bf16 asked for, but {device} "
                               f"({torch.cuda.get_device_name(device)}) does not support bfloat16; use fp16 or fp32")
        return precision
    if kind == "cpu":
        flag = cpu_bf16_flag()
        if precision == "auto":
            chosen = "bf16" if flag else "fp32"
            note_once(("auto", chosen), "%s runs at %s (--precision auto: %s)", encoder_name or "the encoder", chosen,
                       f"{flag} in /proc/cpuinfo" if flag else "no native bf16 on this CPU")
            return chosen
        if precision == "bf16" and not flag:
            log.warning("precision bf16 on a CPU without native bf16 instructions (no avx512_bf16/amx_bf16 "
                        "in /proc/cpuinfo): it runs emulated, probably slower than fp32")
        if precision == "fp16":
            log.warning("precision fp16 on a CPU: most CPUs have no fast fp16 products, expect it slower than fp32")
        return precision
    return "fp32" if precision == "auto" else precision


def with_precision(fingerprint: dict[str, Any], precision: str, runtime: str = "torch") -> dict[str, Any]:
    """`fingerprint` of fp32 weights, marked as run at `precision` by `runtime`.

    fp32 adds nothing to the `id` (so fingerprints from before precisions existed still match),
    any other precision appends `|precision=<p>`; likewise torch adds nothing and another runtime
    appends `|runtime=<r>` after it. The `precision` key (and `runtime`, when not torch) say it
    in plain words.
    """
    fp = dict(fingerprint)
    if precision != "fp32":
        fp["id"] = f"{fp['id']}|precision={precision}"
    fp["precision"] = precision
    if runtime != "torch":
        fp["id"] = f"{fp['id']}|runtime={runtime}"
        fp["runtime"] = runtime
    return fp


def fingerprint_precision(fingerprint: dict[str, Any]) -> str:
    """The precision an artefact's encoder fingerprint records; "fp32" for fingerprints without one."""
    if fingerprint.get("precision"):
        return str(fingerprint["precision"])
    m = _PRECISION_TAG.search(str(fingerprint.get("id", "")))
    return m.group(1) if m else "fp32"


def fingerprint_runtime(fingerprint: dict[str, Any]) -> str:
    """The runtime an artefact's encoder fingerprint records; "torch" for fingerprints without one."""
    m = _RUNTIME_TAG.search(str(fingerprint.get("id", "")))
    return m.group(1) if m else "torch"


def weights_id(fingerprint: dict[str, Any]) -> str:
    """The fingerprint's `id` without its precision and runtime: what identifies the weights (and prefix)."""
    return _PRECISION_TAG.sub("", _RUNTIME_TAG.sub("", str(fingerprint.get("id", ""))))


def check_same_encoder(expected_fp: dict[str, Any], actual_fp: dict[str, Any], *, what: str) -> None:
    """Raise EncoderMismatchError unless both fingerprints are the same encoder at the same precision.

    The rule for embeddings that meet each other (stores, indexes, the embedding cache, the two
    sides of a mine). `what` names the artefact made with `expected_fp` (e.g. "store emb.de/").
    """
    from xmine.errors import EncoderMismatchError

    if not isinstance(expected_fp, dict) or not isinstance(actual_fp, dict):
        raise EncoderMismatchError(f"{what}: no encoder fingerprint to compare ({expected_fp!r} vs {actual_fp!r})")
    if expected_fp.get("id") == actual_fp.get("id") and expected_fp.get("dim") == actual_fp.get("dim"):
        return
    p_exp, p_act = fingerprint_precision(expected_fp), fingerprint_precision(actual_fp)
    r_exp, r_act = fingerprint_runtime(expected_fp), fingerprint_runtime(actual_fp)
    if weights_id(expected_fp) == weights_id(actual_fp) and p_exp == p_act and r_exp != r_act:
        raise EncoderMismatchError(
            f"{what} was made with {expected_fp.get('name')!r} run by {r_exp}, but embeddings run by {r_act} "
            f"meet it here; two runtimes are never mixed: use --runtime {r_exp} for both (or rebuild it with {r_act})"
        )
    if weights_id(expected_fp) == weights_id(actual_fp) and p_exp != p_act:
        raise EncoderMismatchError(
            f"{what} was made with {expected_fp.get('name')!r} at precision {p_exp}, but {p_act} embeddings "
            f"meet it here; two precisions are never mixed: use --precision {p_exp} for both (or rebuild it at {p_act})"
        )
    raise EncoderMismatchError(
        f"{what} was made with encoder {expected_fp.get('name')!r} (id {expected_fp.get('id')!r}, "
        f"dim {expected_fp.get('dim')}), but the encoder given is {actual_fp.get('name')!r} "
        f"(id {actual_fp.get('id')!r}, dim {actual_fp.get('dim')}); use the same encoder (and prefix)"
    )


def check_projection_encoder(trained_fp: dict[str, Any], actual_fp: dict[str, Any], *, what: str) -> None:
    """Raise EncoderMismatchError unless a projection trained on `trained_fp` may take `actual_fp`'s embeddings.

    The same encoder at the same precision and runtime passes silently; the same weights (and
    prefix) at another precision or runtime pass with a one-line notice (logged once per projection and pair of
    fingerprints); anything else is refused as `check_same_encoder` refuses it.
    """
    if (isinstance(trained_fp, dict) and isinstance(actual_fp, dict)
            and trained_fp.get("id") != actual_fp.get("id") and trained_fp.get("dim") == actual_fp.get("dim")
            and weights_id(trained_fp) == weights_id(actual_fp)):
        p_tr = f"{fingerprint_precision(trained_fp)}/{fingerprint_runtime(trained_fp)}"
        p_act = f"{fingerprint_precision(actual_fp)}/{fingerprint_runtime(actual_fp)}"
        # Once per projection (its path: the last word of `what`, however a command names it) and pair.
        note_once((what.split()[-1], trained_fp.get("id"), actual_fp.get("id")), "%s was trained on %s embeddings of %s; applying it to %s embeddings of "
                   "the same weights (they agree to cosine >= 0.995, checked when a runtime's model is built)",
                   what, p_tr, trained_fp.get("name"), p_act)
        return
    check_same_encoder(trained_fp, actual_fp, what=what)
