"""What every trainer (`trainer.py`, `fmda_trainer.py`) shares: the check of the loop's settings,
batches that never cross a group, the mean of loss terms over fixed batches, one optimiser step
that refuses a diverged loss, the early-stopping loop, and the output claimed for a projection."""

from __future__ import annotations

import contextlib
import copy
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from xmine.artefacts.outputs import claim_output
from xmine.disentangle.projection import check_not_shipped
from xmine.encoders import load_encoder
from xmine.errors import ConfigError, check_field_types

logger = logging.getLogger(__name__)


def check_loop_settings(config) -> None:
    """ConfigError unless the settings every trainer has (layers, batch_size, lr, max_epochs,
    patience, seed) are of their kinds and in range (was, from Python: `lr="1"` a TypeError,
    `batch_size=2.5` one after every sentence was embedded)."""
    check_field_types(config, integers=("layers", "batch_size", "max_epochs", "patience", "seed"), reals=("lr",))
    for name in ("layers", "batch_size", "max_epochs", "patience"):
        if getattr(config, name) < 1:
            raise ConfigError(f"{name} must be >= 1, got {getattr(config, name)}")
    if config.batch_size < 2:
        raise ConfigError("batch size must be >= 2 (negatives are drawn inside the batch)")
    if config.lr <= 0:
        raise ConfigError(f"learning rate must be > 0, got {config.lr}")


def checked_run(config, config_class: type, encoder):
    """The encoder of a run (a name, as --encoder takes, loaded) once `config` is checked to be a
    `config_class` in range (was, from Python: `config=None` or `encoder="me5-small"` an
    AttributeError, the second after the pairs were sampled)."""
    if not isinstance(config, config_class):
        raise ConfigError(f"config must be a {config_class.__name__} (got {config!r})")
    config.check()
    if isinstance(encoder, str):
        encoder = load_encoder(encoder)
    return encoder


def batches(groups, batch_size: int, gen, *, shuffle: bool) -> list[tuple[Any, np.ndarray]]:
    """(key, rows) batches of each (key, rows) of `groups`, never across two groups; with `shuffle`
    the rows of each group, then all batches, in an order drawn from `gen`."""
    import torch

    out = []
    for key, members in groups:
        if shuffle:
            members = members[torch.randperm(len(members), generator=gen).numpy()]
        chunks = [members[i:i + batch_size] for i in range(0, len(members), batch_size)]
        if len(chunks) > 1 and len(chunks[-1]) < 2:  # a lone pair has no partner: join the previous batch
            last = chunks.pop()  # (was: popped inside the assignment, so chunks[-2] named the batch before:
            chunks[-1] = np.concatenate([chunks[-1], last])  # a crash at two batches, a batch lost at three)
        out += [(key, c) for c in chunks if len(c) >= 2]
    if shuffle and out:
        out = [out[i] for i in torch.randperm(len(out), generator=gen).tolist()]
    return out


def mean_terms(model, seed: int, batches, terms) -> tuple[dict[str, float], int]:
    """The loss terms' means over the rows of `batches` (no gradients, the model in eval mode) and
    the rows seen; `terms(batch, gen)` gives one batch's terms and rows, `gen` seeded with `seed`."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    totals: dict[str, float] = {}
    n = 0
    model.eval()
    with torch.no_grad():
        for batch in batches:
            values, rows = terms(batch, gen)
            for name, value in values.items():
                totals[name] = totals.get(name, 0.0) + float(value) * rows
            n += rows
    model.train()
    return {k: v / max(n, 1) for k, v in totals.items()}, n


def step(opt, loss, state: dict, lr: float) -> float:
    """One step of `opt` down `loss`, whose value it returns; a ConfigError when the loss is NaN or
    inf (the run diverged)."""
    import torch

    if not bool(torch.isfinite(loss)):
        raise ConfigError(f"training diverged in epoch {state['epoch'] + 1}: the loss is not finite "
                          f"(NaN or inf) at --lr {lr:g}; lower --lr")
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def run_epochs(state: dict, model, *, config, desc: str, valid_name: str, show_progress: bool, log, checkpoint,
               epoch) -> None:
    """The early-stopping loop of every trainer. `epoch()` trains one epoch and returns its history
    entry (train_loss, valid_loss, ...) with `criterion`: what selects the epoch, lower is better
    (ties keep the earlier epoch; default valid_loss; `state["best_loss"]` holds the best). After
    each epoch the checkpoint is saved (`checkpoint()`, the last epoch) and a line logged; at the
    end the best epoch's weights are loaded into `model` (the projection gets the best)."""
    from tqdm.auto import tqdm

    # Not a stored flag: a run stopped by --max-epochs continues when rerun with a higher limit.
    def running() -> bool:
        return state["bad_epochs"] < config.patience and state["epoch"] < config.max_epochs

    bar = tqdm(total=config.max_epochs, initial=state["epoch"], desc=desc, unit="epoch",
               disable=not show_progress or not running(), dynamic_ncols=True)
    model.train()
    with bar:
        while running():
            t0 = time.time()
            entry = epoch()
            c = entry.pop("criterion", entry["valid_loss"])
            state["epoch"] += 1
            h = {"epoch": state["epoch"], **entry, "seconds": round(time.time() - t0, 3)}
            state["history"].append(h)
            if c < state["best_loss"] - 1e-7:
                state.update(best_loss=c, best_epoch=state["epoch"], bad_epochs=0,
                             best_state=copy.deepcopy(model.state_dict()))
            else:
                state["bad_epochs"] += 1
            checkpoint()
            bar.update(1)
            bar.set_postfix(**{valid_name: f"{h['valid_loss']:.4f}"}, best=state["best_epoch"])
            log(f"epoch {state['epoch']}: train loss {h['train_loss']:.4f}, {valid_name} loss {h['valid_loss']:.4f}"
                + (f", dev retrieval {h['dev_retrieval']:.4f}" if "dev_retrieval" in h else "")
                + ("  (best)" if state["best_epoch"] == state["epoch"]
                   else f"  ({state['bad_epochs']} without improvement)"))
    if state["best_state"] is not None:
        model.load_state_dict(state["best_state"])
    if state["epoch"] >= config.max_epochs and state["best_epoch"] == state["epoch"] and state["epoch"] > 1:
        # (was: unsaid; a small run kept its last epoch, the loss still falling, as if it had converged)
        logger.warning(f"training stopped at --max-epochs {config.max_epochs} with its {valid_name} loss still falling "
                       "(the last epoch is the best): more epochs would likely train it further; the same command "
                       "with a higher --max-epochs and --overwrite resumes from its checkpoint")


@contextlib.contextmanager
def training_output(out_dir: str | Path, *, inputs: list, threads: int | None, overwrite: bool):
    """`out_dir` claimed for a projection (`xmine.artefacts.outputs.claim_output`, see `train`) while torch runs
    `threads` CPU threads (None: its default); the thread count is restored afterwards."""
    import torch

    check_not_shipped(out_dir)
    before = torch.get_num_threads()
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        with claim_output(out_dir, kind="projection", form="dir", in_place=True, overwrite=overwrite, inputs=inputs):
            yield
    finally:
        torch.set_num_threads(before)
