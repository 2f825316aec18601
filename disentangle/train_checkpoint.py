"""The resumable checkpoint both trainers keep in their work folder (`checkpoint.pt`): model,
optimisers, RNG state and the loop's state, tied by a signature to one configuration, encoder and
data, so a rerun resumes only the run it belongs to."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from xmine.errors import ConfigError
from xmine.fileio import atomic_path

CHECKPOINT = "checkpoint.pt"


def run_signature(config: Any, encoder: dict, data: dict) -> str:
    """sha256 of the configuration (a dataclass; `max_epochs` left out, so raising the epoch limit
    continues a run), the encoder's identity and the data's summary."""
    cfg = dataclasses.asdict(config)
    cfg.pop("max_epochs")
    blob = json.dumps({"config": cfg, "encoder": encoder, "data": data}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def fresh_state() -> dict[str, Any]:
    """The training loop's state before its first epoch."""
    return {"epoch": 0, "best_loss": float("inf"), "best_epoch": 0, "best_state": None, "bad_epochs": 0,
            "history": []}


def resume(path: Path, signature: str, *, model, optimizers: dict, gen) -> dict[str, Any] | None:
    """Load the checkpoint at `path` into `model`, the `optimizers` (name -> optimiser or None) and
    the generator `gen`, and return the loop's state; None when there is none. A checkpoint of
    another run is a ConfigError."""
    import torch

    if not path.is_file():
        return None
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    if ckpt["signature"] != signature:
        raise ConfigError(f"{path}: holds a run with other settings or data; pass --restart to discard "
                          "it or choose another output directory")
    model.load_state_dict(ckpt["model"])
    for name, opt in optimizers.items():
        if opt is not None:
            opt.load_state_dict(ckpt[name])
    gen.set_state(ckpt["gen"])
    return ckpt["state"]


def save(path: Path, signature: str, *, model, optimizers: dict, gen, state: dict) -> None:
    """Write the checkpoint atomically (a crash leaves the previous one)."""
    import torch

    blob = {"signature": signature, "model": model.state_dict(), "gen": gen.get_state(), "state": state,
            **{name: opt.state_dict() if opt is not None else None for name, opt in optimizers.items()}}
    with atomic_path(path) as tmp:
        torch.save(blob, tmp)
