"""Train FMDA on MASSIVE: en-US paired with each locale given, token states in, four parts out.

The run: `fmda_data.prepare` (seeded sample of the train split, the dev split for early
stopping, BLEU negative pools, token states and masked targets, all cached) -> epochs of Adam
-> the best epoch's weights (`FmdaConfig.select`: highest dev retrieval, or lowest dev loss) saved
as a projection directory (projection.py), like every other method.

A step (FMDA Sec. 3, 4.2) takes B parallel pairs of one language pair (utt in L1 = en-US and in
L2) and, for each, a negative utterance in L1 and one in L2, drawn uniformly (seeded) from the
negative pools of L1 and L2 (never the positive's own text); with the default "clamped"
contrastive form the previous row of the batch (cyclically) is a second negative
(losses.fmda_contrastive_loss).
The loss is Eq. 5, the sum of the terms in `methods.fmda_terms`.

Targets and choices:
- emb_utt (Loss_rec^utt) and the template/residual targets are the encoder's own sentence vector
  of the utterance / of its masked re-encoding: mean pooling for me5-small (the paper's XLM-R
  [CLS] vector is XLM-R's sentence vector), not normalised, on the scale of the token states.
- Missing annotation: only en-US's train rows carry annot_utt here (de-DE also its dev rows).
  So on train rows of EN-X the terms Loss_rec^tpL2, Loss_rec^tpL1-CL, Loss_rec^rsL2 and
  Loss_rec^rsL1-CL have no target and are left out; Loss_rec^tpL1, Loss_rec^tpL2-CL,
  Loss_rec^rsL1 and Loss_rec^rsL2-CL run on every row. The dev loss (early stopping) sums the
  terms training optimises, so the de-DE dev annotation does not add terms training never saw.
  The rows each term saw per epoch are in the projection's config.json (`term_rows`).
- Dual-lingual training, as the paper's Tables 2-3 (one model per language pair): pass one
  locale. Several locales train one model on all their pairs (the paper's Appendix C).

Checkpoint and resume as `trainer.py`: `OUT/.work/checkpoint.safetensors` after every epoch.

Here too: the batches (`Stepper` builds each as a `methods.FmdaBatch`) and what training is
judged on: the dev loss (the terms training optimises), the meaning part's dev retrieval, and the
language part's centroids with their dev accuracy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xmine.artefacts.directory import provenance
from xmine.disentangle.fmda_data import PIVOT, prepare
from xmine.disentangle.projection import load_projection, save_projection
from xmine.disentangle.train_checkpoint import WORK, checkpoint_in, fresh_state, resume, run_signature, save
from xmine.disentangle.train_loop import (batches, check_loop_settings, checked_run, mean_terms, run_epochs, step,
                                         training_output)
from xmine.errors import ConfigError, check_list_of_names

logger = logging.getLogger(__name__)


@dataclass(kw_only=True)
class FmdaConfig:
    """How to train FMDA (the paper: "hyperparameters similar to Tiyajamorn et al. 2021")."""

    #: locales paired with en-US (MASSIVE codes: de-DE, es-ES, ja-JP)
    partners: list[str] = field(default_factory=lambda: ["de-DE"])
    #: parallel pairs per step (Tiyajamorn et al.'s 512, as `xmine train` passes; was 64 here, so the
    #: Python API trained otherwise than the command without a word)
    batch_size: int = 512
    #: Adam learning rate
    lr: float = 1e-4
    #: linear layers per MLP (language, meaning, utterance decoder); see model.py
    layers: int = 1
    #: Loss_con^tp / Loss_con^m (Eqs. 3-4): "clamped" (negatives clamped at 0, pool + in-batch
    #: negatives; the default, see losses.fmda_contrastive_loss) or "paper" (the printed equations)
    contrastive: str = "clamped"
    #: what picks the epoch kept and early-stops: "dev-retrieval" (the default: accuracy@1 of the
    #: meaning part retrieving each dev row's translation among the dev rows, both directions,
    #: mean; highest wins) or "dev-loss" (Eq. 5 on the dev rows; lowest wins). Not from the paper,
    #: an engineering choice: on EN-DE the meaning part's retrieval peaks epochs before the dev
    #: loss stops falling; selecting on it was as good or better on 3 of 4 test directions, in
    #: half the epochs (benchmarks/results/notes/fmda_table2.md). Both are recorded per epoch.
    select: str = "dev-retrieval"
    #: the meaning MLP's initialisation: "default" (torch's) or "identity" (weight I, bias 0, one
    #: layer only: meaning starts as emb_tp + emb_rs). Not from the paper; +1.1 / +1.5 test
    #: acc@1 on EN-DE / DE-EN at lr 5e-4 (fmda_table2.md), kept optional (one pair, one seed).
    meaning_init: str = "default"
    max_epochs: int = 50
    #: epochs without a better `select` criterion before stopping
    patience: int = 5
    #: at most this many train rows (a seeded sample; the same ids for every pair); None = all 11,514
    max_train: int | None = None
    #: at most this many dev rows for early stopping; None = all 2,033
    max_dev: int | None = None
    seed: int = 0

    def check(self) -> None:
        check_list_of_names(self.partners, "partners")
        if not self.partners:
            raise ConfigError("FMDA needs at least one locale to pair with en-US (--langs de-DE)")
        if any(str(p).lower() in (PIVOT.lower(), "en") for p in self.partners):  # (was: en-US paired with itself)
            raise ConfigError(f"partners (--langs): {PIVOT} is the locale every other is paired with; leave it out")
        check_loop_settings(self)
        for name, allowed in (("contrastive", ("clamped", "paper")), ("select", ("dev-retrieval", "dev-loss")),
                              ("meaning_init", ("default", "identity"))):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name} must be {allowed[0]!r} or {allowed[1]!r}, got {getattr(self, name)!r}")
        # each named as the field and as `xmine train`'s option (was: the field alone)
        if self.meaning_init == "identity" and self.layers != 1:
            raise ConfigError(f"meaning_init 'identity' (--fmda-meaning-init identity) needs layers 1 (--layers 1), "
                              f"got {self.layers}")
        for name, option in (("max_train", "--max-pairs-per-lang"), ("max_dev", "--max-valid-pairs")):
            v = getattr(self, name)
            if v is not None and v < 8:
                raise ConfigError(f"{name} ({option}) must be >= 8 for FMDA, got {v}")


def train_fmda(massive_dir: str | Path, out_dir: str | Path, *, encoder, config: FmdaConfig, restart: bool = False,
               show_progress: bool = True, threads: int | None = 1, overwrite: bool = False):
    """Train FMDA on MASSIVE's `massive_dir` (<locale>.jsonl files); write `out_dir`; return it loaded.

    `out_dir` is claimed as `trainer.train` claims it (`xmine.artefacts.outputs.claim_output`): new, empty,
    an unfinished run (resumed) or, with `overwrite`, a finished projection (replaced).
    """
    encoder = checked_run(config, FmdaConfig, encoder)
    inputs = [Path(massive_dir) / f"{loc}.jsonl" for loc in ["en-US", *config.partners]]
    with training_output(out_dir, inputs=inputs, threads=threads, overwrite=overwrite):
        return _train_fmda(massive_dir, out_dir, encoder=encoder, config=config, restart=restart,
                           show_progress=show_progress)


def _train_fmda(massive_dir, out_dir, *, encoder, config: FmdaConfig, restart: bool, show_progress: bool):
    import torch
    from tqdm.auto import tqdm

    from xmine.disentangle.model import FMDA
    from xmine.disentangle.methods import fmda_terms

    out_dir = Path(out_dir)
    log = (lambda msg: tqdm.write(msg, file=sys.stderr)) if show_progress else (lambda msg: None)
    data = prepare(encoder, massive_dir, config.partners, max_train=config.max_train, max_dev=config.max_dev,
                   seed=config.seed, show_progress=show_progress, log=log)
    locales = data.locales
    encoder_fp = encoder.fingerprint()
    spec = {"dim": int(encoder.dim), "architecture": "fmda", "languages": locales, "layers": config.layers}
    torch.manual_seed(config.seed)
    model = FMDA(spec)
    if config.meaning_init == "identity":
        with torch.no_grad():
            model.meaning_mlp[0].weight.copy_(torch.eye(model.dim))
            model.meaning_mlp[0].bias.zero_()
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    gen = torch.Generator().manual_seed(config.seed)
    stepper = Stepper(model, data, locales, config.contrastive)
    summary = dict(data.summary)
    summary["ids_sha256"] = hashlib.sha256(",".join(data.ids_train + ["|"] + data.ids_dev).encode()).hexdigest()
    identity = {k: encoder_fp.get(k) for k in ("name", "dim", "id")}  # the id carries a non-fp32 precision
    signature = run_signature(config, identity, summary)
    ckpt_path = checkpoint_in(out_dir / WORK)
    state = resume(ckpt_path, signature, max_epochs=config.max_epochs, model=model, optimizers={"opt": opt},
                   gen=gen, restart=restart)
    if state is not None:
        log(f"resuming from {ckpt_path} after epoch {state['epoch']} (best epoch {state['best_epoch']})")
    state = state or fresh_state()

    # Which terms have rows in training (they depend only on where annotation exists).
    trained = {"Loss_lang^L1", "Loss_lang^L2", "Loss_rec^utt-L1", "Loss_rec^utt-L2", "Loss_con^tp", "Loss_con^m"}
    ann = {loc: bool(data.data[loc].annotated[data.train_rows].any()) for loc in locales}
    for p in config.partners:
        for part in ("tp", "rs"):
            if ann[PIVOT]:
                trained |= {f"Loss_rec^{part}L1", f"Loss_rec^{part}L2-CL"}
            if ann[p]:
                trained |= {f"Loss_rec^{part}L2", f"Loss_rec^{part}L1-CL"}

    if state["epoch"] == 0 and not state["history"]:
        v0, _ = dev_loss(stepper, data, config, trained)
        state["initial_valid_loss"], state["initial_dev_retrieval"] = v0, dev_retrieval(stepper, data, config)
        log(f"epoch 0: dev loss {v0:.4f}, dev retrieval {state['initial_dev_retrieval']:.4f} (untrained)")

    def epoch() -> dict:
        total, n = 0.0, 0
        rows_seen: dict[str, int] = {}
        for partner, rows in batches([(p, data.train_rows) for p in config.partners], config.batch_size, gen,
                                     shuffle=True):
            terms, counts = fmda_terms(stepper.batch(partner, rows, gen))
            total += step(opt, sum(terms.values()), state, config.lr) * len(rows)  # Eq. 5
            n += len(rows)
            for k, c in counts.items():
                rows_seen[k] = rows_seen.get(k, 0) + c
        v, vterms = dev_loss(stepper, data, config, trained)
        r = dev_retrieval(stepper, data, config)
        return dict(train_loss=total / max(n, 1), valid_loss=v, valid_terms=vterms, dev_retrieval=r,
                    criterion=-r if config.select == "dev-retrieval" else v, term_rows=rows_seen)

    run_epochs(state, model, config=config, desc="training fmda", valid_name="dev", show_progress=show_progress,
               log=log, epoch=epoch,
               checkpoint=lambda: save(ckpt_path, signature, model=model, optimizers={"opt": opt}, gen=gen,
                                       state=state))
    best = state["history"][state["best_epoch"] - 1] if state["best_epoch"] else {}
    untrained = state.get("initial_dev_retrieval")
    no_gain = None
    best_dev = best.get("dev_retrieval")
    if untrained is not None and best_dev is not None and best_dev < untrained:
        # refused as `train` refuses a loss that never fell: worse than none, and a warning is easily missed
        raise ConfigError(f"no epoch retrieved the dev rows as well as the untrained model (best dev retrieval "
                          f"{best_dev:.4f}, untrained {untrained:.4f}); no projection written: train "
                          f"longer (a higher --max-epochs resumes from the checkpoint in {ckpt_path.parent}), change "
                          "--lr (with --restart), or try --fmda-meaning-init identity")
    if untrained is not None and best_dev == untrained:
        # a tie is not refused: a tiny dev set the untrained model already retrieves in full ties
        no_gain = (f"no epoch retrieved the dev rows better than the untrained model (dev retrieval "
                   f"{best_dev:.4f}, untrained {untrained:.4f}): the projection written is no better "
                   "than none for retrieval; train longer, change --lr, or try --fmda-meaning-init identity")
        logger.warning("%s", no_gain)
    langid = fit_langid(stepper, data, locales)
    log(f"dev language identification accuracy (language part, nearest centroid): {langid['accuracy']:.4f}")
    hyper = dataclasses.asdict(config)
    term_rows = state["history"][-1]["term_rows"] if state["history"] else {}
    cfg = {
        "method": "fmda", "base": None, "token_level": True,
        "summary": "FMDA: template/residual/language/meaning parts from the encoder's token states",
        "encoder": encoder_fp, "dim": spec["dim"], "languages": locales,
        "language_pairs": [f"{PIVOT}-{p}" for p in config.partners], "hyperparameters": hyper,
        "training_data": summary, "trained_terms": sorted(trained),
        "left_out_terms": sorted({f"Loss_rec^{part}{side}" for part in ("tp", "rs")
                                  for side in ("L1", "L2", "L1-CL", "L2-CL")} - trained), "term_rows_per_epoch": term_rows,
        "history": state["history"], "initial_valid_loss": state.get("initial_valid_loss"),
        "initial_dev_retrieval": state.get("initial_dev_retrieval"),
        "best_epoch": state["best_epoch"], "best_valid_loss": best.get("valid_loss"),
        "best_dev_retrieval": best.get("dev_retrieval"), "selected_on": config.select, "langid": langid,
        **({"note": no_gain} if no_gain else {}),
        "provenance": provenance(massive=str(massive_dir), encoder=encoder_fp, **hyper),
    }
    save_projection(out_dir, model, cfg)
    return load_projection(out_dir)


class Stepper:
    """Builds FmdaBatch objects from the prepared data (token stores, targets, pools)."""

    def __init__(self, model, data, locales: list[str], contrastive: str = "clamped"):
        self.model, self.data, self.lang_index = model, data, {l: i for i, l in enumerate(locales)}
        self.contrastive = contrastive

    def negatives(self, loc: str, rows: np.ndarray, gen) -> np.ndarray:
        import torch

        d = self.data.data[loc]
        pool = d.pool_rows
        if len(pool) < 2:
            raise ConfigError(f"{loc}: negative pool has {len(pool)} utterance(s); too few to draw negatives")
        pick = pool[torch.randint(0, len(pool), (len(rows),), generator=gen).numpy()]
        for k, (r, p) in enumerate(zip(rows, pick)):  # never the positive itself
            if d.utts[p] == d.utts[r]:
                pick[k] = pool[(int(np.searchsorted(pool, p)) + 1) % len(pool)]
        return pick

    def parts(self, loc: str, rows: np.ndarray) -> dict:
        from xmine.disentangle.model import pad_batch

        store = self.data.data[loc].store
        return self.model(*pad_batch([store.token_states(int(r)) for r in rows]))  # (states, mask)

    def batch(self, partner: str, rows: np.ndarray, gen):
        import torch

        from xmine.disentangle.methods import FmdaBatch

        d1, d2 = self.data.data[PIVOT], self.data.data[partner]
        n1, n2 = self.negatives(PIVOT, rows, gen), self.negatives(partner, rows, gen)

        def targets(d):
            if d.template_target is None:
                z = torch.zeros(len(rows), d.store.pooled.shape[1])
                return z, z, torch.zeros(len(rows), dtype=torch.bool)
            return (torch.from_numpy(d.template_target[rows]), torch.from_numpy(d.residual_target[rows]),
                    torch.from_numpy(d.annotated[rows]))

        tp1, rs1, has1 = targets(d1)
        tp2, rs2, has2 = targets(d2)
        b = len(rows)
        return FmdaBatch(
            parts_l1=self.parts(PIVOT, rows), parts_l2=self.parts(partner, rows),
            parts_l1_neg=self.parts(PIVOT, n1), parts_l2_neg=self.parts(partner, n2),
            utt_l1=torch.from_numpy(np.asarray(d1.store.pooled[rows])),
            utt_l2=torch.from_numpy(np.asarray(d2.store.pooled[rows])),
            tp_tgt_l1=tp1, tp_tgt_l2=tp2, rs_tgt_l1=rs1, rs_tgt_l2=rs2, has_tgt_l1=has1, has_tgt_l2=has2,
            lang_l1=torch.full((b,), self.lang_index[PIVOT], dtype=torch.long),
            lang_l2=torch.full((b,), self.lang_index[partner], dtype=torch.long), model=self.model,
            contrastive=self.contrastive)


def _part(stepper, loc: str, rows, part: str):
    """The L2-normalised `part` of `rows` of locale `loc`, 256 rows a forward pass."""
    import torch
    import torch.nn.functional as F

    with torch.no_grad():
        return F.normalize(torch.cat([stepper.parts(loc, rows[s:s + 256])[part] for s in range(0, len(rows), 256)]),
                           dim=-1, eps=1e-12)


def dev_loss(stepper, data, config, trained: set[str]) -> tuple[float, dict[str, float]]:
    from xmine.disentangle.methods import fmda_terms

    def terms(unit, gen):
        values, _ = fmda_terms(stepper.batch(*unit, gen))
        return {k: v for k, v in values.items() if k in trained}, len(unit[1])

    units = batches([(p, data.dev_rows) for p in config.partners], config.batch_size, None, shuffle=False)
    means, _ = mean_terms(stepper.model, config.seed + 1, units, terms)
    return sum(means.values()), means


def dev_retrieval(stepper, data, config) -> float:
    """Accuracy@1 of the meaning part on the dev rows: each en-US row retrieves its partner row
    among all dev rows of the partner by cosine, and back; the mean over directions and partners."""
    import torch

    stepper.model.eval()
    accs = []
    gold = torch.arange(len(data.dev_rows))
    for p in config.partners:
        sim = _part(stepper, PIVOT, data.dev_rows, "meaning") @ _part(stepper, p, data.dev_rows, "meaning").T
        accs += [float((sim.argmax(1) == gold).float().mean()), float((sim.argmax(0) == gold).float().mean())]
    stepper.model.train()
    return sum(accs) / len(accs)


def fit_langid(stepper, data, locales) -> dict[str, Any]:
    """Language-part centroids from train rows (stored for `langid`), accuracy on dev rows."""
    import torch

    from xmine.disentangle.model import fit_langid_centroids, langid_report

    stepper.model.eval()

    def parts(rows):
        per = [_part(stepper, loc, rows, "language") for loc in locales]
        return torch.cat(per), torch.cat([torch.full((len(p),), i, dtype=torch.long) for i, p in enumerate(per)])

    cent = fit_langid_centroids(stepper.model, *parts(data.train_rows[:2000]))
    return langid_report(*parts(data.dev_rows), cent, locales)
