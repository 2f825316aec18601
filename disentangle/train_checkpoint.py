"""The resumable checkpoint both trainers keep in their work folder (`checkpoint.safetensors`):
model, optimisers, RNG state and the loop's state, tied by a signature to one configuration,
encoder and data, so a rerun resumes only the run it belongs to, and sealed by a checksum of its
record and every tensor, so a damaged or edited checkpoint is refused, never trained on.

Nothing in it is code: tensors (weights, optimiser moments, the generator's state as uint8) in a
safetensors file, and the numbers (signature, epoch, losses, history, optimiser settings) as JSON
in that file's header metadata, one atomic file. Its header is read and the signature compared
before any tensor is loaded. xmine never unpickles a checkpoint: a `checkpoint.pt` (the pickle
format of older versions, or one planted in a shared folder) is never loaded (`LEGACY`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from pathlib import Path
import struct
from typing import Any, NamedTuple

from xmine.errors import ArtefactError, ConfigError
from xmine.artefacts.fileio import atomic_path

#: the folder inside a projection output that holds its training checkpoint
WORK = ".work"
CHECKPOINT = "checkpoint.safetensors"
#: the pickled checkpoint of older xmine versions: never loaded (removed by `train`, refused by `verify`)
LEGACY = "checkpoint.pt"
_FORMAT = "xmine-train-checkpoint"
_META = "xmine"  # the header metadata key holding the JSON
#: a header larger than this is not a checkpoint xmine wrote (history and settings are a few kB)
_MAX_HEADER = 64 << 20

log = logging.getLogger("xmine.disentangle")


def checkpoint_in(work: Path) -> Path:
    """The checkpoint's path in the output's work folder `work`. A pickled checkpoint found there
    (`LEGACY`) is removed unread, with a warning; a work folder or checkpoint that is a symbolic
    link (it would be read and written outside the output) is refused."""
    for p in (work, work / CHECKPOINT):
        if p.is_symlink():
            raise ArtefactError(f"{p}: is a symbolic link; xmine keeps a training checkpoint inside its output "
                                "only (move it away or choose another output directory)")
    legacy = work / LEGACY
    if legacy.is_file():
        legacy.unlink()
        log.warning(f"{legacy}: removed without loading it: a pickled checkpoint (an older xmine's, or planted); "
                    "xmine loads no pickles")
    return work / CHECKPOINT


class RunSignature(NamedTuple):
    """What ties a checkpoint to one run: the sha256 `digest` of its `settings` (as JSON), which a
    checkpoint records too, so that another run's can be told apart by name."""

    digest: str
    settings: dict


def run_signature(config: Any, encoder: dict, data: dict) -> RunSignature:
    """The signature of the configuration (a dataclass; `max_epochs` and `patience` left out: they
    only say when to stop, so raising either continues a run, and was "other settings" for
    patience), the encoder's identity and the data's summary, where a file that
    records its sha256 is that and not its path (was: the same files named by an absolute path, or
    from another folder, were "other data" and the run could not resume)."""
    cfg = dataclasses.asdict(config)
    cfg.pop("max_epochs")
    cfg.pop("patience", None)
    settings = json.loads(json.dumps({"config": cfg, "encoder": encoder, "data": data}, sort_keys=True, default=str))
    digest = hashlib.sha256(json.dumps(_contents(settings), sort_keys=True).encode()).hexdigest()
    return RunSignature(digest, settings)


def _contents(value: Any) -> Any:
    """`value` without the paths of files whose sha256 sits beside them (`src` beside `src_sha256`)."""
    if isinstance(value, dict):
        return {k: _contents(v) for k, v in value.items() if f"{k}_sha256" not in value}
    if isinstance(value, list):
        return [_contents(v) for v in value]
    return value


def _differences(there: Any, here: Any, where: str = "", limit: int = 3) -> list[str]:
    """Up to `limit` settings that differ between a checkpoint's (`there`) and this run's (`here`),
    each "name: value there, value here" (a long text from where the two part); an item of a list
    of files is named by its file (was: the two lists, cut to the same first 70 characters)."""
    if isinstance(there, dict) and isinstance(here, dict):
        found: list[str] = []
        for key in sorted(set(there) | set(here)):
            found += _differences(there.get(key), here.get(key), f"{where}.{key}" if where else key, limit)
        return found[:limit]
    if isinstance(there, list) and isinstance(here, list) and len(there) == len(here):
        found = []
        for i, (a, b) in enumerate(zip(there, here)):
            # (a pair of files as --pairs names it: was its source alone, for a change of its target)
            name = ":".join(b[side] for side in ("src", "tgt") if isinstance(b.get(side), str)) \
                if isinstance(b, dict) else ""
            name = name or i
            found += _differences(a, b, f"{where}[{name}]", limit)
        return found[:limit]
    if there == here:
        return []

    def shown(v: Any) -> str:
        text = repr(v)
        if isinstance(there, str) and isinstance(here, str):  # from the last "|" field (an encoder id's) they share
            common = len(os.path.commonprefix([there, here]))
            bar = there.rfind("|", 0, common) + 1
            cut = bar if bar and common - bar <= 40 else max(0, common - 12)
            text = ("..." if cut else "") + repr(v[cut:])
        return text if len(text) <= 70 else text[:67] + "..."

    return [f"{where}: {shown(there)} there, {shown(here)} here"]


def fresh_state() -> dict[str, Any]:
    """The training loop's state before its first epoch."""
    return {"epoch": 0, "best_loss": float("inf"), "best_epoch": 0, "best_state": None, "bad_epochs": 0,
            "history": []}


def _content_digest(meta: dict[str, Any], tensors: dict[str, Any]) -> str:
    """sha256 of a checkpoint's record (without its own checksum) and of every tensor (name, dtype,
    shape, bytes, in name order): what `save` seals and `resume`/`verify` check. One value byte
    changed anywhere, in the loop's numbers or in a weight, changes it."""
    import torch

    h = hashlib.sha256(json.dumps({k: v for k, v in meta.items() if k != "content_sha256"},
                                  sort_keys=True).encode())
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        h.update(f"\x00{name}\x00{t.dtype}\x00{tuple(t.shape)}\x00".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def save(path: Path, signature: RunSignature, *, model, optimizers: dict, gen, state: dict) -> None:
    """Write the checkpoint atomically (a crash leaves the previous one): the tensors by name, the
    JSON of everything else in the header."""
    from safetensors.torch import save_file

    tensors = {f"model/{k}": v for k, v in model.state_dict().items()}
    if state.get("best_state") is not None:
        tensors.update({f"best/{k}": v for k, v in state["best_state"].items()})
    tensors["gen"] = gen.get_state()
    opts: dict[str, Any] = {}
    for name, opt in optimizers.items():
        if opt is None:
            opts[name] = None
            continue
        sd = opt.state_dict()
        numbers: dict[str, dict] = {}
        for pid, entries in sd["state"].items():
            for key, value in entries.items():
                if hasattr(value, "detach"):
                    tensors[f"opt/{name}/{pid}/{key}"] = value
                else:
                    numbers.setdefault(str(pid), {})[key] = value
        opts[name] = {"param_groups": sd["param_groups"], "numbers": numbers}
    loop = {k: v for k, v in state.items() if k != "best_state"}
    meta = {"format": _FORMAT, "version": 1, "signature": signature.digest, "settings": signature.settings,
            "state": loop,
            "has_best_state": state.get("best_state") is not None, "optimizers": opts}
    tensors = {k: v.detach().contiguous().clone() for k, v in tensors.items()}
    meta["content_sha256"] = _content_digest(meta, tensors)
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={_META: json.dumps(meta)})


def read_header(path: Path) -> dict[str, Any]:
    """The checkpoint's JSON (signature, loop state, optimiser settings), read from the header
    alone: no tensor is loaded. ArtefactError naming the file when it is not a checkpoint xmine
    wrote."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            size = struct.unpack("<Q", head)[0] if len(head) == 8 else None
            if size is None or size > _MAX_HEADER:
                raise ValueError("not a safetensors file")
            header = json.loads(f.read(size))
        meta = json.loads(header["__metadata__"][_META])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ArtefactError(f"{path}: not a training checkpoint xmine wrote ({type(e).__name__}: {e}); "
                            "pass --restart to discard it") from None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT or not isinstance(meta.get("signature"), str) \
            or not isinstance(meta.get("state"), dict) or not isinstance(meta.get("optimizers"), dict):
        raise ArtefactError(f"{path}: not a training checkpoint xmine wrote (its header holds no xmine "
                            "checkpoint record); pass --restart to discard it")
    return meta


def _tensors(path: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """Every tensor of the checkpoint, checked against the checksum `save` sealed it with (one
    written before checkpoints recorded it is loaded as it is)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError) as e:
        raise ArtefactError(f"{path}: damaged training checkpoint ({e}); pass --restart to discard it") from None
    if "content_sha256" in meta and meta["content_sha256"] != _content_digest(meta, tensors):
        raise ArtefactError(f"{path}: training checkpoint differs from the checksum it was written with: edited or "
                            "damaged since xmine wrote it; pass --restart to discard it")
    return tensors


def check_resumable(path: Path, signature: RunSignature, *, max_epochs: int) -> dict[str, Any] | None:
    """The header of the checkpoint at `path`, read alone (no tensor), when it is this run's to
    resume (see `resume`); None when there is none. A ConfigError when it holds another run or this
    run trained beyond `max_epochs`, an ArtefactError when it is not a checkpoint xmine wrote.
    `train` calls it before it embeds its data (was: such a checkpoint was refused only after every
    sentence was embedded)."""
    if not path.is_file():
        return None
    meta = read_header(path)
    if meta["signature"] != signature.digest:
        # (checkpoints written before they recorded their settings are named without them)
        named = _differences(meta["settings"], signature.settings) if isinstance(meta.get("settings"), dict) else []
        raise ConfigError(f"{path}: holds a run with other settings or data" + (f" ({'; '.join(named)})" if named else "")
                          + "; pass --restart to discard it or choose another output directory")
    done = meta["state"].get("epoch")
    if isinstance(done, int) and done > max_epochs:
        # Resumed, it would train nothing and write its later epochs' weights under this limit.
        raise ConfigError(f"{path}: holds this run trained for {done} epochs, more than --max-epochs {max_epochs}; "
                          f"pass --restart to train from scratch, or --max-epochs {done} or more to keep it")
    return meta


def resume(path: Path, signature: RunSignature, *, max_epochs: int, model, optimizers: dict,
           gen, restart: bool = False) -> dict[str, Any] | None:
    """Load the checkpoint at `path` into `model`, the `optimizers` (name -> optimiser or None) and
    the generator `gen`, and return the loop's state; None when there is none. A checkpoint of
    another run, or of this run trained beyond `max_epochs` (the one setting the signature leaves
    out, so that a higher limit continues a run), is a ConfigError (found from its header, before
    its tensors are read); a damaged one an ArtefactError. `restart` (--restart): none is resumed,
    and one that is there is said to be left unread (it is replaced by the first epoch's)."""
    if not path.is_file():
        return None
    if restart:  # (was: not a word)
        log.info(f"{path}: not resumed (--restart): training from scratch replaces it")
        return None
    meta = check_resumable(path, signature, max_epochs=max_epochs)
    tensors = _tensors(path, meta)
    state = dict(meta["state"])
    try:
        model.load_state_dict(_part(tensors, "model/"))
        state["best_state"] = _part(tensors, "best/") if meta.get("has_best_state") else None
        for name, opt in optimizers.items():
            if opt is not None:
                rec = meta["optimizers"][name]
                entries: dict[int, dict] = {}
                for key, value in _part(tensors, f"opt/{name}/").items():
                    pid, field = key.split("/", 1)
                    entries.setdefault(int(pid), {})[field] = value
                for pid, numbers in rec["numbers"].items():
                    entries.setdefault(int(pid), {}).update(numbers)
                opt.load_state_dict({"state": entries, "param_groups": rec["param_groups"]})
        gen.set_state(tensors["gen"])
    except (RuntimeError, KeyError, ValueError, TypeError, AttributeError) as e:
        raise ArtefactError(f"{path}: does not fit this run's model ({type(e).__name__}: {str(e)[:200]}); "
                            "pass --restart to discard it") from None
    return state


def _part(tensors: dict, prefix: str) -> dict:
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}


def verify_checkpoint(path: Path) -> int:
    """`xmine verify` of a projection's checkpoint: its header is xmine's and every tensor loads and
    matches the checksum it was written with; the bytes read. Damaged, the error says what verify's
    user can do (was: "pass --restart", an option of train, not of verify)."""
    try:
        _tensors(path, read_header(path))
    except ArtefactError as e:
        said = str(e).removesuffix("; pass --restart to discard it")
        raise ArtefactError(f"{said}; the projection's own files are checked before it, and it serves only to "
                            f"resume training: delete {path.parent}, or train again with --restart") from None
    return path.stat().st_size
