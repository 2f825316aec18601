"""The disentangling methods, by name: each is an architecture plus a sum of named loss terms.

| name     | architecture  | training loss (terms as the papers name them)                          |
|----------|---------------|-------------------------------------------------------------------------|
| center   | centering     | none: per-language means of the training data (the papers' baseline)   |
| dream    | two_networks  | L_R + L_M^x + L_M^m + L_L^m + L_L^i                       (DREAM Eq. 1) |
| meat     | two_networks  | L_R + L_CR + L_L + L_A, discriminator in alternation (ORACLE Eq. 4)     |
| oracle   | two_networks  | (dream or meat, `base`) + L_IC + L_IS                  (ORACLE Eq. 7)  |
| seed     | residual      | L_M + L_L + L_C                                            (SEED Eq. 3) |
| intra    | residual      | L_mean + L_lang                              (intra/inter paper Eq. 2) |
| inter    | residual      | L_cross + L_sep                              (intra/inter paper Eq. 5) |
| fmda     | fmda (tokens) | Loss_lang + Loss_rec^utt,tp,rs(-CL) + Loss_con^tp + Loss_con^m (FMDA Eq. 5) |

`seed` = `intra` + `inter` term for term: L_M = L_mean, L_L = L_lang, L_C = L_sep + L_cross.

Choices:
- MEAT's L_R, L_CR and L_L follow the ORACLE authors' code (cosine forms; see losses.py Choices).
- Validation loss (early stopping) is the training loss without the adversarial term L_A, which
  depends on a discriminator that moves every step and so is not comparable across epochs.
- New methods plug in with `register_method`: give an architecture and a `terms` function;
  trainer, projection, CLI pick them up by name. A token-level method (FMDA) reads the
  encoder's token states, not pooled vectors: its terms read an `FmdaBatch` and it trains with
  `fmda_trainer`, on MASSIVE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from xmine.disentangle import losses as L
from xmine.errors import ConfigError


@dataclass(kw_only=True)
class Batch:
    """Everything a loss term may read for one batch of B parallel pairs (s_i, t_i).

    `neg[i]` is the index of s'_i / t'_i: another pair of the same language pair in the batch.
    """

    #: frozen encoder embeddings of sources / targets, (B, d)
    e_s: Tensor
    e_t: Tensor
    #: meaning and language parts, (B, d)
    m_s: Tensor
    m_t: Tensor
    l_s: Tensor
    l_t: Tensor
    #: language class ids of each side, (B,)
    lang_s: Tensor
    lang_t: Tensor
    #: index of each row's same-language random partner, (B,)
    neg: Tensor
    #: the model (for its heads: language_classifier, discriminator)
    model: torch.nn.Module

    def n(self, x: Tensor) -> Tensor:
        """The rows of x belonging to the random partners (s', t')."""
        return x[self.neg]


TermsFn = Callable[[Batch], dict[str, Tensor]]


@dataclass(frozen=True, kw_only=True)
class Method:
    """A disentangling method: its architecture and its loss terms."""

    #: registry name (`--method`)
    name: str
    #: one of model.ARCHITECTURES
    architecture: str
    #: one-line description for --help
    summary: str
    #: named loss terms of a batch; their sum is the training loss (None: no training)
    terms: TermsFn | None
    #: the model has DREAM's language classifier MLP_I
    language_classifier: bool = False
    #: the model has MEAT's adversarial language discriminator (trained in alternation)
    adversarial: bool = False
    #: `oracle` only: the method it is added to
    base: str | None = None


# --- term compositions ---------------------------------------------------------------------------

def dream_terms(b: Batch) -> dict[str, Tensor]:
    clf = b.model.language_classifier
    return {
        "L_R": L.reconstruction_loss(b.e_s, b.m_s, b.l_s) + L.reconstruction_loss(b.e_t, b.m_t, b.l_t),  # Eq. 2
        "L_M^x": L.meaning_parallel_loss(b.m_s, b.m_t),  # Eq. 6
        "L_M^m": L.meaning_random_loss(b.m_s, b.n(b.m_s), b.m_t, b.n(b.m_t)),  # Eq. 7
        "L_L^m": L.language_embedding_loss(b.l_s, b.n(b.l_s), b.l_t, b.n(b.l_t)),  # Eq. 9
        "L_L^i": L.language_identification_loss(clf(b.l_s), b.lang_s)
        + L.language_identification_loss(clf(b.l_t), b.lang_t),  # Eqs. 10-11
    }


def meat_terms(b: Batch) -> dict[str, Tensor]:
    disc = b.model.discriminator
    return {
        "L_R": L.meat_reconstruction_loss(b.e_s, b.e_t, b.m_s, b.m_t, b.l_s, b.l_t),
        "L_CR": L.cross_reconstruction_loss(b.e_s, b.e_t, b.m_s, b.m_t, b.l_s, b.l_t),
        "L_L": L.meat_language_loss(b.l_s, b.l_t),
        "L_A": L.adversarial_loss(disc(b.m_s)) + L.adversarial_loss(disc(b.m_t)),
    }


def oracle_terms(base: TermsFn) -> TermsFn:
    def terms(b: Batch) -> dict[str, Tensor]:
        out = base(b)
        out["L_IC"] = L.intra_class_clustering_loss(b.l_s, b.l_t)  # ORACLE Eq. 5
        out["L_IS"] = L.inter_class_separation_loss(b.m_s, b.l_s, b.m_t, b.l_t)  # ORACLE Eq. 6
        return out

    return terms


def intra_terms(b: Batch) -> dict[str, Tensor]:
    return {
        "L_mean": L.seed_meaning_loss(b.m_s, b.m_t, b.n(b.m_s), b.n(b.m_t)),  # intra/inter Eq. 3
        "L_lang": L.language_embedding_loss(b.l_s, b.n(b.l_s), b.l_t, b.n(b.l_t)),  # Eq. 4
    }


def inter_terms(b: Batch) -> dict[str, Tensor]:
    return {
        "L_cross": L.seed_cross_loss(b.e_s, b.e_t, b.m_s, b.m_t, b.l_s, b.l_t, b.n(b.l_s), b.n(b.l_t)),  # Eq. 6
        "L_sep": L.inter_class_separation_loss(b.m_s, b.l_s, b.m_t, b.l_t),  # Eq. 7
    }


def seed_terms(b: Batch) -> dict[str, Tensor]:
    return {
        "L_M": L.seed_meaning_loss(b.m_s, b.m_t, b.n(b.m_s), b.n(b.m_t)),  # SEED Eq. 4
        "L_L": L.language_embedding_loss(b.l_s, b.n(b.l_s), b.l_t, b.n(b.l_t)),  # SEED Eq. 5
        "L_C": L.seed_combined_loss(b.e_s, b.e_t, b.m_s, b.m_t, b.l_s, b.l_t, b.n(b.l_s), b.n(b.l_t)),  # Eq. 6
    }


@dataclass(kw_only=True)
class FmdaBatch:
    """One FMDA step (FMDA Sec. 3): B parallel pairs (L1 = en-US, L2) and B negatives per language.

    `parts_*` are FMDA's outputs (template, residual, language, meaning), each (B, D); `utt_*` the
    encoder's pooled vectors; `tp_tgt_*` / `rs_tgt_*` the masked re-encodings with `has_tgt_*`
    saying which rows have them (the annotated ones).
    """

    parts_l1: dict[str, Tensor]
    parts_l2: dict[str, Tensor]
    parts_l1_neg: dict[str, Tensor]
    parts_l2_neg: dict[str, Tensor]
    utt_l1: Tensor
    utt_l2: Tensor
    tp_tgt_l1: Tensor
    tp_tgt_l2: Tensor
    rs_tgt_l1: Tensor
    rs_tgt_l2: Tensor
    has_tgt_l1: Tensor
    has_tgt_l2: Tensor
    lang_l1: Tensor
    lang_l2: Tensor
    model: torch.nn.Module
    #: form of the contrastive terms (losses.fmda_contrastive_loss): "clamped" (default) or "paper"
    contrastive: str = "clamped"


def fmda_terms(b: FmdaBatch) -> tuple[dict[str, Tensor], dict[str, int]]:
    """The terms of FMDA's Eq. 5 and the rows each saw (a term without rows is left out).

    Part reconstruction needs the target of the language it reconstructs: Loss_rec^tpL1 and
    Loss_rec^tpL2-CL (emb_tp^L2 + emb_lang^L1 -> target of L1) need L1's annotation;
    Loss_rec^tpL2 and Loss_rec^tpL1-CL need L2's; the same for rs.
    """
    m = b.model
    p1, p2, n1, n2 = b.parts_l1, b.parts_l2, b.parts_l1_neg, b.parts_l2_neg
    rows = len(b.utt_l1)
    terms = {
        "Loss_lang^L1": L.fmda_language_loss(m.language_classifier(p1["language"]), b.lang_l1),  # Sec. 3.2
        "Loss_lang^L2": L.fmda_language_loss(m.language_classifier(p2["language"]), b.lang_l2),
        "Loss_rec^utt-L1": L.fmda_utterance_reconstruction_loss(m.reconstruct_utterance(p1), b.utt_l1),  # Sec. 3.3
        "Loss_rec^utt-L2": L.fmda_utterance_reconstruction_loss(m.reconstruct_utterance(p2), b.utt_l2),
        "Loss_con^tp": L.fmda_contrastive_loss(p1["template"], p2["template"], n1["template"], n2["template"],
                                               form=b.contrastive),  # Eq. 3
        "Loss_con^m": L.fmda_contrastive_loss(p1["meaning"], p2["meaning"], n1["meaning"], n2["meaning"],
                                              form=b.contrastive),  # Eq. 4
    }
    counts = {k: rows for k in terms}
    for part, tgt1, tgt2 in (("tp", b.tp_tgt_l1, b.tp_tgt_l2), ("rs", b.rs_tgt_l1, b.rs_tgt_l2)):
        key = "template" if part == "tp" else "residual"
        for name, x, lang, tgt, has in (
            (f"Loss_rec^{part}L1", p1[key], p1["language"], tgt1, b.has_tgt_l1),  # Eq. 1 (rs: same process)
            (f"Loss_rec^{part}L2", p2[key], p2["language"], tgt2, b.has_tgt_l2),
            (f"Loss_rec^{part}L1-CL", p1[key], p2["language"], tgt2, b.has_tgt_l2),  # Eq. 2
            (f"Loss_rec^{part}L2-CL", p2[key], p1["language"], tgt1, b.has_tgt_l1),
        ):
            value, n = L.fmda_part_reconstruction_loss(x, lang, tgt, has)
            if n:
                terms[name], counts[name] = value, n
    return terms, counts


# --- registry ------------------------------------------------------------------------------------

METHODS: dict[str, Method] = {}


def register_method(method: Method) -> Method:
    """Add a method to the registry (the entry point for new methods such as FMDA)."""
    METHODS[method.name] = method
    return method


register_method(Method(name="center", architecture="centering", terms=None,
                       summary="subtract the per-language mean (no training beyond the means)"))
register_method(Method(name="dream", architecture="two_networks", terms=dream_terms, language_classifier=True,
                       summary="DREAM (Tiyajamorn+ 2021): two MLPs, L_R + L_M + L_L"))
register_method(Method(name="meat", architecture="two_networks", terms=meat_terms, language_classifier=False,
                       adversarial=True,
                       summary="MEAT (Kuroda+ 2022): L_R + L_CR + L_L + adversarial L_A"))
register_method(Method(name="seed", architecture="residual", terms=seed_terms,
                       summary="SEED (Fukushima+ 2025): one MLP, language = input - meaning; L_M + L_L + L_C"))
register_method(Method(name="intra", architecture="residual", terms=intra_terms,
                       summary="SEED's intra-component constraints only: L_mean + L_lang"))
register_method(Method(name="inter", architecture="residual", terms=inter_terms,
                       summary="SEED's inter-component constraints only: L_cross + L_sep"))
register_method(Method(name="fmda", architecture="fmda", terms=fmda_terms, language_classifier=True,
                       summary="FMDA: token-level template/residual/language/meaning, reconstruction + contrastive "
                               "losses (trains on MASSIVE)"))
# `oracle` needs a base; `get_method("oracle", base=...)` builds it.
ORACLE_BASES = ("dream", "meat")
METHOD_NAMES = ("center", "dream", "meat", "oracle", "seed", "intra", "inter", "fmda")


def get_method(name: str, *, base: str | None = None) -> Method:
    """The method called `name` (`oracle` adds L_IC + L_IS to `base`, dream or meat)."""
    if name == "oracle":
        base = base or "dream"
        if base not in ORACLE_BASES:
            raise ConfigError(f"oracle: --base must be one of {', '.join(ORACLE_BASES)}, not {base!r}")
        b = METHODS[base]
        return Method(name="oracle", architecture=b.architecture, terms=oracle_terms(b.terms),
                      language_classifier=b.language_classifier, adversarial=b.adversarial, base=base,
                      summary=f"ORACLE (Ki+ 2024) on {base}: + L_IC + L_IS")
    if name not in METHODS:
        raise ConfigError(f"unknown method {name!r}; choose one of {', '.join(sorted(set(METHODS) | {'oracle'}))}")
    if base is not None:
        raise ConfigError(f"--base applies to --method oracle only (got --method {name})")
    return METHODS[name]
