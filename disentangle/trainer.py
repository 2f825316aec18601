"""Train a disentangler on parallel data: sample, embed (cached), fit, early-stop, save, resume.

The run: `discover_pairs` -> `sample_pairs` (seeded, 10% held out) -> raw embeddings (`cached_encode`)
-> epochs of Adam over batches -> the best (lowest validation loss) weights saved (`projection.py`).

Batches: each batch holds pairs of ONE language pair (all sources one language, all targets
one), so the random same-language partners s', t' the losses need are drawn inside the batch:
partner(i) = (i + k) mod B with k uniform in [1, B-1], one k per batch (never the pair itself).
Batches of all language pairs are shuffled together each epoch (a multilingual model).

Checkpoint: after every epoch `OUT/.work/checkpoint.safetensors` is replaced atomically (model,
optimisers, RNG state, epoch, best weights, history, patience, a signature of settings and data):
a rerun resumes after its last epoch; one with other settings is refused unless `restart=True`.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.artefacts.directory import provenance
from xmine.io.corpus import truncate_for_encoding
from xmine.disentangle.data import discover_pairs
from xmine.disentangle.meaning_check import check_meaning_kept, meaning_retrieval
from xmine.disentangle.sample import VALID_SPLITS, check_alignment, sample_pairs
from xmine.disentangle.projection import load_projection, save_projection
from xmine.disentangle.train_checkpoint import (WORK, check_resumable, checkpoint_in, fresh_state, resume,
                                               run_signature, save)
from xmine.disentangle.train_loop import (batches, check_loop_settings, checked_run, mean_terms, run_epochs, step,
                                         training_output)
from xmine.encoders.embed_cache import cached_encode
from xmine.errors import ConfigError, check_field_types, check_list_of_names


@dataclass(kw_only=True)
class TrainConfig:
    """How to train (defaults from the papers: DREAM Sec. 3.4, SEED Sec. 3.1)."""

    #: method name (methods.METHOD_NAMES)
    method: str = "seed"
    #: `oracle` only: the method ORACLE's terms are added to (dream or meat)
    base: str | None = None
    #: linear layers per MLP (papers: 1)
    layers: int = 1
    #: pairs per batch (papers: 512)
    batch_size: int = 512
    #: Adam learning rate (papers: 1e-4)
    lr: float = 1e-4
    #: stop after this many epochs even without early stopping
    max_epochs: int = 200
    #: early stopping: epochs without a lower validation loss before stopping (SEED: 5)
    patience: int = 5
    #: share of each language pair held out for validation (papers: 10%)
    valid_fraction: float = 0.1
    #: how held-out pairs are chosen (`xmine.disentangle.sample.VALID_SPLITS`): "disjoint", no held-out
    #: sentence trained on (multi-way data share sentences between language pairs); "per-pair",
    #: each language pair split on its own (the shipped projection's recipe)
    valid_split: str = "disjoint"
    #: at most this many sentence pairs per language pair (seeded sample); None = all
    max_pairs_per_lang: int | None = None
    #: keep only language pairs whose two languages are both listed; None = all found
    langs: list[str] | None = None
    #: seed of sampling, split, initialisation, batching and negatives
    seed: int = 0

    def check(self) -> None:
        from xmine.disentangle.methods import get_method

        get_method(self.method, base=self.base)
        check_loop_settings(self)
        check_field_types(self, reals=("valid_fraction",), integers=("max_pairs_per_lang",))
        check_list_of_names(self.langs, "langs")
        if self.max_pairs_per_lang is not None and self.max_pairs_per_lang < 4:
            raise ConfigError("max pairs per language must be >= 4")
        if self.valid_split not in VALID_SPLITS:
            raise ConfigError(f"valid split must be one of {', '.join(VALID_SPLITS)} (got {self.valid_split!r})")


@dataclass(kw_only=True)
class _Data:
    e_s: Any  # torch (n, d)
    e_t: Any
    lang_s: Any  # torch long (n,)
    lang_t: Any
    group: np.ndarray
    train_idx: np.ndarray
    valid_idx: np.ndarray


def _batches(idx: np.ndarray, group: np.ndarray, batch_size: int, gen, *, shuffle: bool) -> list[np.ndarray]:
    """Index arrays of batches, each within one language pair (see module doc)."""
    groups = [(g, idx[group[idx] == g]) for g in np.unique(group[idx])]
    return [rows for _, rows in batches(groups, batch_size, gen, shuffle=shuffle)]


def _make_batch(model, data: _Data, rows: np.ndarray, gen):
    import torch

    from xmine.disentangle.methods import Batch

    r = torch.from_numpy(rows)
    e_s, e_t = data.e_s[r], data.e_t[r]
    lang_s, lang_t = data.lang_s[r], data.lang_t[r]
    m_s, l_s = model(e_s, lang_s)
    m_t, l_t = model(e_t, lang_t)
    b = len(rows)
    k = int(torch.randint(1, b, (1,), generator=gen))
    neg = (torch.arange(b) + k) % b
    return Batch(e_s=e_s, e_t=e_t, m_s=m_s, m_t=m_t, l_s=l_s, l_t=l_t, lang_s=lang_s, lang_t=lang_t,
                 neg=neg, model=model)


def validation_loss(model, method, data: _Data, config: TrainConfig) -> tuple[float, dict[str, float]]:
    """Mean validation loss (without L_A) and its terms; fixed batches and partners (seeded)."""
    means, n = mean_terms(model, config.seed + 1, _batches(data.valid_idx, data.group, config.batch_size, None,
                                                           shuffle=False),
                          lambda rows, gen: (method.terms(_make_batch(model, data, rows, gen)), len(rows)))
    if n == 0:
        raise ConfigError("no validation batch: no language pair holds out 2 pairs (sample_pairs refuses such data)")
    return sum(v for k, v in means.items() if k != "L_A"), means


def _language_parts(model, e, lang):
    import torch

    with torch.no_grad():
        return torch.nn.functional.normalize(model(e, lang)[1], dim=-1, eps=1e-12)


def _fit_langid(model, data: _Data, languages: list[str]) -> dict[str, Any]:
    """Store language-part centroids (training rows) and measure langid on held-out rows."""
    import torch

    from xmine.disentangle.model import fit_langid_centroids, langid_report

    tr = torch.from_numpy(data.train_idx)
    cent = fit_langid_centroids(model, torch.cat([_language_parts(model, data.e_s[tr], data.lang_s[tr]),
                                                  _language_parts(model, data.e_t[tr], data.lang_t[tr])]),
                                torch.cat([data.lang_s[tr], data.lang_t[tr]]))
    va = torch.from_numpy(data.valid_idx)
    # Held-out rows: the language is NOT given (centering infers it, like at use time); a sentence held
    # out in several language pairs (multi-way data's English) counts once (was: once a language pair)
    rows, langs = torch.cat([data.e_s[va], data.e_t[va]]), torch.cat([data.lang_s[va], data.lang_t[va]])
    first = np.unique(np.column_stack([langs.numpy(), rows.numpy()]), axis=0, return_index=True)[1]
    keep = torch.from_numpy(np.sort(first))
    return langid_report(_language_parts(model, rows[keep], None), langs[keep], cent, languages)


def train(
    pair_specs: Sequence[str],
    out_dir: str | Path,
    *,
    encoder,
    config: TrainConfig,
    restart: bool = False,
    show_progress: bool = True,
    threads: int | None = 1,
    overwrite: bool = False,
):
    """Train a projection on the parallel files `pair_specs` (a list: directories or SRC:TGT, as
    --pairs takes them) with `encoder` (loaded, or its name); write it to `out_dir`; return it loaded.

    `threads`: torch CPU threads while training (None: torch's default), restored afterwards. The
    networks are small (d x d); one thread is nearly as fast as several and does not fight other
    jobs for cores.

    `out_dir` is claimed first (`xmine.artefacts.outputs.claim_output`): it must be new, empty, an
    unfinished run of `train` to resume (its checkpoint decides: other settings are refused) or,
    with `overwrite`, a finished projection to replace (its checkpoint is resumed as well: a run
    stopped by max_epochs continues with a higher limit; `restart` trains from scratch); never an
    input or another artefact, and never written by two runs at once.
    """
    encoder = checked_run(config, TrainConfig, encoder)
    files = discover_pairs(pair_specs, langs=config.langs)
    inputs = [spec for spec in pair_specs if Path(spec).exists()] + [p for f in files for p in (f.src, f.tgt)]
    with training_output(out_dir, inputs=inputs, threads=threads, overwrite=overwrite):
        return _train(files, pair_specs, Path(out_dir), encoder=encoder, config=config, restart=restart,
                      show_progress=show_progress)


def _train(files, pair_specs, out_dir: Path, *, encoder, config: TrainConfig, restart: bool, show_progress: bool):
    import torch
    from tqdm.auto import tqdm

    from xmine.disentangle.losses import discriminator_loss
    from xmine.disentangle.methods import get_method
    from xmine.disentangle.model import Disentangler

    method = get_method(config.method, base=config.base)
    log = (lambda msg: tqdm.write(msg, file=sys.stderr)) if show_progress else (lambda msg: None)

    sample = sample_pairs(files, max_pairs_per_lang=config.max_pairs_per_lang,
                          valid_fraction=config.valid_fraction, seed=config.seed, valid_split=config.valid_split)
    log(f"training data: {len(files)} file pair(s), {len(sample.lang_pairs)} language pair(s), "
        f"{len(sample.src)} sentence pairs ({int(sample.valid.sum())} held out), languages {', '.join(sample.languages)}")

    encoder_fp = encoder.fingerprint()
    signature = run_signature(config, encoder_fp, sample.summary)
    ckpt_path = checkpoint_in(out_dir / WORK)
    if not restart:  # a checkpoint it would refuse, refused before the embedding
        check_resumable(ckpt_path, signature, max_epochs=config.max_epochs)

    # Embed every distinct sentence once (cached across runs and methods).
    unique = list(dict.fromkeys(sample.src + sample.tgt))
    where = {s: i for i, s in enumerate(unique)}
    emb = cached_encode(encoder, truncate_for_encoding(unique), show_progress=show_progress, desc="embedding pairs")
    emb_t = torch.from_numpy(emb)
    data = _Data(
        e_s=emb_t[torch.as_tensor([where[s] for s in sample.src])],
        e_t=emb_t[torch.as_tensor([where[t] for t in sample.tgt])],
        lang_s=torch.from_numpy(sample.src_lang), lang_t=torch.from_numpy(sample.tgt_lang),
        group=sample.group, train_idx=np.flatnonzero(~sample.valid), valid_idx=np.flatnonzero(sample.valid),
    )

    aligned = check_alignment(data.e_s.numpy(), data.e_t.numpy(), sample)  # (not in the run's signature)
    if int(encoder_fp["dim"]) != emb.shape[1]:
        raise ConfigError(f"encoder {encoder_fp.get('name')} reports dim {encoder_fp['dim']} but produced {emb.shape[1]}")
    spec = {"dim": int(emb.shape[1]), "architecture": method.architecture, "layers": config.layers,
            "languages": sample.languages, "language_classifier": method.language_classifier,
            "discriminator": method.adversarial}
    torch.manual_seed(config.seed)
    model = Disentangler(spec)
    extractor_params = [p for n, p in model.named_parameters() if not n.startswith("discriminator.")]
    opt = torch.optim.Adam(extractor_params, lr=config.lr) if extractor_params else None
    opt_disc = torch.optim.Adam(model.discriminator.parameters(), lr=config.lr) if model.discriminator else None
    gen = torch.Generator().manual_seed(config.seed)

    optimizers = {"opt": opt, "opt_disc": opt_disc}
    state = resume(ckpt_path, signature, max_epochs=config.max_epochs, model=model, optimizers=optimizers,
                   gen=gen, restart=restart)
    if state is not None:
        log(f"resuming from {ckpt_path} after epoch {state['epoch']} (best valid loss {state['best_loss']:.4f})")
    state = state or fresh_state()

    if method.terms is None:  # center: the means are the whole model
        tr = torch.from_numpy(data.train_idx)
        sums = torch.zeros(len(sample.languages), spec["dim"])
        sums.index_add_(0, data.lang_s[tr], data.e_s[tr])
        sums.index_add_(0, data.lang_t[tr], data.e_t[tr])
        counts = torch.bincount(torch.cat([data.lang_s[tr], data.lang_t[tr]]), minlength=len(sample.languages))
        model.language_means.copy_(sums / counts.clamp(min=1).unsqueeze(1).float())
    else:
        if state["epoch"] == 0 and not state["history"]:
            state["initial_valid_loss"] = v0 = validation_loss(model, method, data, config)[0]
            state["initial_meaning_retrieval"] = meaning_retrieval(model, data)  # (`meaning_check`)
            log(f"epoch 0: valid loss {v0:.4f} (untrained)")

        def epoch() -> dict[str, Any]:
            total, n = 0.0, 0
            for rows in _batches(data.train_idx, data.group, config.batch_size, gen, shuffle=True):
                batch = _make_batch(model, data, rows, gen)
                if opt_disc is not None:  # MEAT: the discriminator learns first, on detached meanings
                    opt_disc.zero_grad()
                    d_loss = (discriminator_loss(model.discriminator(batch.m_s.detach()), batch.lang_s)
                              + discriminator_loss(model.discriminator(batch.m_t.detach()), batch.lang_t))
                    d_loss.backward()
                    opt_disc.step()
                total += step(opt, sum(method.terms(batch).values()), state, config.lr) * len(rows)
                n += len(rows)
            v, terms = validation_loss(model, method, data, config)
            return dict(train_loss=total / max(n, 1), valid_loss=v, valid_terms=terms)

        run_epochs(state, model, config=config, desc=f"training {config.method}", valid_name="valid",
                   show_progress=show_progress, log=log, epoch=epoch,
                   checkpoint=lambda: save(ckpt_path, signature, model=model, optimizers=optimizers, gen=gen,
                                           state=state))
        # No epoch below the untrained model, or a meaning part lost (`meaning_check`): worse than none, so refused.
        if (untrained := state.get("initial_valid_loss")) is not None and state["best_loss"] >= untrained:
            raise ConfigError(f"training never improved on the untrained model: best validation loss "
                              f"{state['best_loss']:.4f} (epoch {state['best_epoch']}), untrained {untrained:.4f}, "
                              f"at --lr {config.lr:g}; no projection written: lower --lr (with --restart, as its "
                              f"checkpoint in {ckpt_path.parent} is of this --lr) or raise --max-epochs (resumed "
                              "from it)")
        check_meaning_kept(state, model, data, lr=config.lr, checkpoint=ckpt_path)

    langid = _fit_langid(model, data, sample.languages)
    log(f"held-out language identification accuracy: {langid['accuracy']:.4f}")
    hyper = dataclasses.asdict(config)
    cfg = {
        "method": config.method, "base": method.base, "summary": method.summary,
        "encoder": encoder_fp, "dim": spec["dim"], "languages": sample.languages,
        "language_pairs": [f"{a}-{b}" for a, b in sample.lang_pairs],
        "hyperparameters": hyper, "training_data": {**sample.summary, "aligned_share": aligned},
        "history": state["history"], "initial_valid_loss": state.get("initial_valid_loss"),
        "best_epoch": state["best_epoch"], "best_valid_loss": None if method.terms is None else state["best_loss"],
        "langid": langid,
        "provenance": provenance(pairs=list(pair_specs), encoder=encoder_fp,
                                 training_files=sample.summary["files"], **hyper),
    }
    save_projection(out_dir, model, cfg)
    return load_projection(out_dir)
