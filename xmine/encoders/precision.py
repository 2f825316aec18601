"""Precisions and fingerprints: what `auto` means on a device, how a fingerprint records the
precision and runtime an encoder ran at, and the one rule for mixing them (`check_same_encoder`,
`check_projection_encoder`); see `xmine.encoders` for the rule in words."""

from __future__ import annotations

import logging
from functools import lru_cache
import platform
from typing import Any

from xmine.encoders.base import PRECISIONS, note_once
from xmine.errors import EncoderError, EncoderMismatchError
from xmine.encoders.external import EXTERNAL_ID_PREFIX
from xmine.artefacts.records import EncoderFingerprint, EncoderId

log = logging.getLogger("xmine.encoders")  # (the package's logger: one name for every encoder message)

#: an encoder fingerprint: the record, or its JSON as `Encoder.fingerprint()` and manifests give it
Fingerprint = EncoderFingerprint | dict[str, Any] | None


@lru_cache(maxsize=1)
def cpu_bf16_flag() -> str | None:
    """The CPU feature that makes bf16 fast here, or None: "amx_bf16" or "avx512_bf16" (x86), "bf16" (aarch64).

    Read from the `flags` (x86) or `Features` (aarch64) line of /proc/cpuinfo: torch reports only
    the vector width it dispatches to (`torch.backends.cpu.get_cpu_capability()` says "AVX512" on
    CPUs with and without bf16 instructions), and oneDNN runs bf16 even without them, emulated
    and slower than fp32. Where /proc/cpuinfo does not exist (macOS, Windows), None.
    """
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
            # (no encoder named: a fact of the machine, said once per machine, before any encoder is loaded)
            note_once(("auto-cuda", chosen), "transformer encoders run at %s on %s (--precision auto)",
                      chosen, device, per_machine=True)
            return chosen
        if precision == "bf16" and not bf16_ok:
            raise EncoderError(f"{encoder_name or 'encoder'}: precision bf16 asked for, but {device} "
                               f"({torch.cuda.get_device_name(device)}) does not support bfloat16; use fp16 or fp32")
        return precision
    if kind == "cpu":
        flag = cpu_bf16_flag()
        if precision == "auto":
            chosen = "bf16" if flag else "fp32"
            # (no encoder named: a fact of the machine, said once per machine, before any encoder is loaded;
            # was: "/no/such/model runs at bf16" before that name's error)
            note_once(("auto", chosen), "transformer encoders run at %s (--precision auto: %s)", chosen,
                      f"{flag} in /proc/cpuinfo" if flag else "no native bf16 on this CPU", per_machine=True)
            return chosen
        if precision == "bf16" and not flag:
            log.warning("precision bf16 on a CPU without native bf16 instructions (no avx512_bf16/amx_bf16 "
                        "in /proc/cpuinfo): it runs emulated, probably slower than fp32")
        if precision == "fp16":
            log.warning("precision fp16 on a CPU: most CPUs have no fast fp16 products, expect it slower than fp32")
        return precision
    return "fp32" if precision == "auto" else precision


def with_precision(fingerprint: dict[str, Any], precision: str, runtime: str = "torch",
                   build: str | None = None) -> dict[str, Any]:
    """`fingerprint` of fp32 weights, marked as run at `precision` by `runtime`.

    fp32 adds nothing to the `id` (so fingerprints from before precisions existed still match),
    any other precision appends `|precision=<p>`; likewise torch adds nothing and another runtime
    appends `|runtime=<r>` after it. The `precision` key (and `runtime`, when not torch) say it
    in plain words.
    """
    fp = dict(fingerprint)
    fp["id"] = str(EncoderId(weights=fp["id"], precision=precision, runtime=runtime, build=build))
    fp["precision"] = precision
    if runtime != "torch":
        fp["runtime"] = runtime
    return fp


def _record(fingerprint: Fingerprint, what: str) -> EncoderFingerprint:
    if isinstance(fingerprint, EncoderFingerprint):
        return fingerprint
    if fingerprint is None:
        raise EncoderMismatchError(f"{what}: no encoder fingerprint to compare")
    return EncoderFingerprint.from_dict(fingerprint, where=what)


def _same_weights_and_dim(a: EncoderFingerprint, b: EncoderFingerprint) -> bool:
    """Whether `a` and `b` differ at most in the precision or runtime they were run at."""
    return a.id.weights == b.id.weights and a.dim == b.dim


def check_same_encoder(expected_fp: Fingerprint, actual_fp: Fingerprint, *, what: str) -> None:
    """Raise EncoderMismatchError unless both fingerprints are the same encoder at the same precision.

    The rule for embeddings that meet each other (stores, indexes, the embedding cache, the two
    sides of a mine). `what` names the artefact made with `expected_fp` (e.g. "store emb.de/").
    """
    exp, act = _record(expected_fp, what), _record(actual_fp, what)
    if exp.id == act.id and exp.dim == act.dim:
        return
    p_exp, p_act, r_exp, r_act = exp.run_precision, act.run_precision, exp.id.runtime, act.id.runtime
    # Runtime and precision explain a mismatch only where the rest agrees: other dimensions (a record
    # edited or damaged by hand) are named as such, not as a runtime to switch.
    same_weights_and_dim = _same_weights_and_dim(exp, act)
    if same_weights_and_dim and p_exp == p_act and r_exp != r_act:
        raise EncoderMismatchError(
            f"{what} was made with {exp.name!r} run by {r_exp}, but embeddings run by {r_act} "
            f"meet it here; two runtimes are never mixed: embed text given here with --runtime {r_exp} "
            f"(runtime={r_exp!r} in Python), or rebuild one of the two so that both are run by the same runtime"
        )
    if same_weights_and_dim and p_exp != p_act:
        raise EncoderMismatchError(
            f"{what} was made with {exp.name!r} at precision {p_exp}, but {p_act} embeddings "
            f"meet it here; two precisions are never mixed: embed text given here with --precision {p_exp} "
            f"(precision={p_exp!r} in Python), or rebuild one of the two so that both are at the same precision"
        )
    # the same weights with another prompt: named as such, with the option that gives the prompt
    prompts = exp.id.other_prompt_only(act.id)
    if prompts is not None and exp.dim == act.dim:
        prompt_exp, prompt_act = prompts
        raise EncoderMismatchError(
            f"{what} was made with {exp.name!r} and the prompt {prompt_exp}, but embeddings with the prompt "
            f"{prompt_act} meet it here; the prompt is part of the embeddings: make both with the same prompt "
            f"(--prompt {prompt_exp}; prompt={prompt_exp} in Python)"
        )
    if exp.id == act.id and str(exp.id).startswith(EXTERNAL_ID_PREFIX):  # two sizes of vectors made elsewhere
        # under one --encoder-name (xmine's own encoders of one id have one size: a record edited by hand)
        raise EncoderMismatchError(
            f"{what} holds {exp.dim}-dimensional embeddings of {exp.name!r}, but {act.dim}-dimensional ones under "
            f"the same name meet it here: they cannot be the same encoder's; give vectors made elsewhere the name "
            "of the encoder that made them (--encoder-name), and make both sides with one encoder"
        )
    raise EncoderMismatchError(
        f"{what} was made with encoder {exp.name!r} (id {exp.id!r}, dim {exp.dim}), but embeddings of "
        f"{act.name!r} (id {act.id!r}, dim {act.dim}) meet it here; use the same encoder (and prefix)"
    )


#: least cosine to torch fp32 on the probe set for a converted OpenVINO model to be used (ov_build)
MIN_COSINE = {"fp32": 0.9999, "bf16": 0.999, "int8": 0.995}


def check_projection_encoder(trained_fp: Fingerprint, actual_fp: Fingerprint, *, what: str) -> None:
    """Raise EncoderMismatchError unless a projection trained on `trained_fp` may take `actual_fp`'s embeddings.

    The same encoder at the same precision and runtime passes silently; the same weights (and
    prefix) at another precision or runtime pass with a one-line notice (logged once per projection and pair of
    fingerprints); anything else is refused as `check_same_encoder` refuses it.
    """
    tr, act = _record(trained_fp, what), _record(actual_fp, what)
    if tr.id != act.id and _same_weights_and_dim(tr, act):
        # Once per projection (its path: the last word of `what`, however a command names it) and pair.
        # (was: 0.995 whatever the precisions, the int8 bar, where bf16 and fp32 agree more closely)
        bound = min(MIN_COSINE.get(r.run_precision, MIN_COSINE["bf16"]) for r in (tr, act))
        note_once((what.split()[-1], tr.id, act.id), "%s was trained on %s embeddings of %s; applying it to %s "
                  "embeddings of the same weights (each agrees with the fp32 weights to cosine >= %s, checked when "
                  "an OpenVINO model is built)", what, f"{tr.run_precision}/{tr.id.runtime}", tr.name,
                  f"{act.run_precision}/{act.id.runtime}", bound, per_machine=True)
        return
    check_same_encoder(tr, act, what=what)
