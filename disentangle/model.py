"""The disentanglers as torch modules: `Disentangler` splits a frozen-encoder sentence embedding
into (meaning, language) parts; `FMDA` splits the encoder's token states into four parts.

`Disentangler`: three architectures cover the methods (see `methods.py`):
- `two_networks` (DREAM, MEAT, ORACLE): meaning = MLP_M(e), language = MLP_L(e) (DREAM Eqs. 3-4).
- `residual` (SEED, intra, inter): meaning = MLP(e), language = e - meaning (SEED Eqs. 1-2), so
  meaning + language reproduces the input exactly.
- `centering` (`center`): meaning = e - mu_lang, language = mu_lang, with mu_lang the training mean
  of the sentence's language; when the language is not given it is the nearest mean (by cosine).

"MLP" is `layers` linear maps d -> d (default 1, the papers' single layer, no activation); with
more than one, ReLU between them. Auxiliary heads live in the same module so one state dict
holds everything: `language_classifier` (DREAM's MLP_I, Eq. 10) and `discriminator` (MEAT's
adversary), both single linear layers d -> number of languages.

Buffers: `language_means` (centering only) and `langid_centroids` (every method: the normalised
mean language part of each training language, for `langid`).

`FMDA` (Fine-grained Multilingual Disentangled Autoencoder), on token states. Input: the frozen
encoder's last hidden states emb_utt (B, L, D) and the padding mask (B, L); position 0 is the
first token (`<s>`, XLM-R's [CLS]). Outputs per sentence (FMDA Sec. 3.1, Fig. 2), each (B, D):

- language:  emb_lang = MLP_lang(emb_cls)
- template:  P = softmax(Query_tp Key_tp^T);  emb_tp = (P Value_tp)[CLS]
- residual:  P_rs = softmax(1 - P)  (the paper's "1 - Attn-prob");  emb_rs = (P_rs Value_rs)[CLS]
- meaning:   emb_m = MLP_m(emb_tp + emb_rs)  (Sec. 3.4)

and the heads the losses use: `language_classifier` (the "MLP layer" giving the language
prediction P, Sec. 3.2) and `utterance_decoder` (the MLP of the utterance reconstruction,
Sec. 3.3).

Choices where the paper is silent or ambiguous:
- "FFN layer": one linear map D -> D (as attention's query/key/value projections). "MLP"
  (language, meaning, utterance decoder): `spec["layers"]` linear maps D -> D with ReLU between,
  default 1, no activation: DREAM's MLP (Tiyajamorn et al. 2021, whose hyperparameters FMDA
  says it reuses, Sec. 4.2), as `Disentangler` reads it. Measured on EN-DE (2,000 train
  rows, me5-small; benchmarks/results/notes/fmda_table2.md): with two layers and a ReLU the
  meaning part kept 58-66% acc@1 and fell with more epochs; with one linear layer 73-74%.
  Projections saved before `layers` was in the spec had two layers and load as such. The
  language classifier "MLP layer" is one linear map D -> K languages.
- The attention logits are scaled by 1/sqrt(D), as in Vaswani et al.: the paper writes
  softmax(Q K^T) without a scale; unscaled logits of 384-dim projections saturate the softmax
  at initialisation, and the "1 - P" construction then sees only 0s and a 1.
- Padding positions get probability 0 in both softmaxes (the paper does not discuss padding).
- Only the [CLS] row of P and of P_rs is ever read (emb_tp and emb_rs are [CLS] positions), so
  the query FFN runs on the [CLS] state only; this is the paper's computation, not an
  approximation (rows of a row-wise softmax are independent).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

ARCHITECTURES = ("two_networks", "residual", "centering")
FMDA_PARTS = ("meaning", "template", "residual", "language")
#: MLP depth of FMDA projections saved before the spec recorded `layers`
LEGACY_LAYERS = 2


def mlp(dim: int, layers: int) -> nn.Module:
    """`layers` Linear(dim, dim) with a ReLU between each two (the papers' projection MLPs)."""
    if layers < 1:
        raise ValueError("layers must be >= 1")
    parts = [m for _ in range(layers) for m in (nn.Linear(dim, dim), nn.ReLU())]
    return nn.Sequential(*parts[:-1])


class Disentangler(nn.Module):
    """Splits embeddings into meaning and language parts; built from a JSON-able `spec` dict.

    spec keys: `dim`, `architecture`, `layers`, `languages` (list of codes, index = class id),
    `language_classifier` (bool), `discriminator` (bool).
    """

    def __init__(self, spec: dict[str, Any]):
        super().__init__()
        self.spec = dict(spec)
        self.dim = dim = int(spec["dim"])
        self.architecture = arch = spec["architecture"]
        if arch not in ARCHITECTURES:
            raise ValueError(f"unknown architecture {arch!r}")
        n_langs = max(1, len(spec.get("languages", [])))
        self.meaning = mlp(dim, int(spec.get("layers", 1))) if arch != "centering" else None
        self.language = mlp(dim, int(spec.get("layers", 1))) if arch == "two_networks" else None
        self.language_classifier = nn.Linear(dim, n_langs) if spec.get("language_classifier") else None
        self.discriminator = nn.Linear(dim, n_langs) if spec.get("discriminator") else None
        self.register_buffer("langid_centroids", torch.zeros(n_langs, dim))
        if arch == "centering":
            self.register_buffer("language_means", torch.zeros(n_langs, dim))

    def forward(self, e: Tensor, lang: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """(meaning, language) parts of e (B, d); not normalised. `lang`: class ids, centering only."""
        if self.architecture == "two_networks":
            return self.meaning(e), self.language(e)
        if self.architecture == "residual":
            m = self.meaning(e)
            return m, e - m
        if lang is None:  # the language mean closest (cosine) to each row
            means = F.normalize(self.language_means, dim=-1, eps=1e-8)
            lang = (F.normalize(e, dim=-1, eps=1e-8) @ means.T).argmax(dim=-1)
        mu = self.language_means[lang]
        return e - mu, mu



class FMDA(nn.Module):
    """spec keys: `dim`, `languages` (index = class id), `layers` (per MLP), `architecture` = "fmda"."""

    def __init__(self, spec: dict[str, Any]):
        super().__init__()
        layers = int(spec.get("layers", LEGACY_LAYERS))  # (checked by `mlp`)
        self.spec = dict(spec, architecture="fmda", layers=layers)
        self.dim = d = int(spec["dim"])
        n_langs = max(1, len(spec.get("languages", [])))
        self.query_tp = nn.Linear(d, d)
        self.key_tp = nn.Linear(d, d)
        self.value_tp = nn.Linear(d, d)
        self.value_rs = nn.Linear(d, d)
        self.language_mlp = mlp(d, layers)
        self.meaning_mlp = mlp(d, layers)
        self.utterance_decoder = mlp(d, layers)
        self.language_classifier = nn.Linear(d, n_langs)
        # like Disentangler: normalised mean language part per training language (langid)
        self.register_buffer("langid_centroids", torch.zeros(n_langs, d))

    def attention(self, h: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """([CLS] row of the template attention P, [CLS] row of P_rs = softmax(1 - P)), each (B, L)."""
        q = self.query_tp(h[:, 0])  # (B, D)
        k = self.key_tp(h)  # (B, L, D)
        logits = torch.einsum("bd,bld->bl", q, k) / math.sqrt(self.dim)
        pad = ~mask.bool()
        p = torch.softmax(logits.masked_fill(pad, float("-inf")), dim=-1)
        p_rs = torch.softmax((1.0 - p).masked_fill(pad, float("-inf")), dim=-1)
        return p, p_rs

    def forward(self, h: Tensor, mask: Tensor) -> dict[str, Tensor]:
        """The four parts of token states `h` (B, L, D) with padding `mask` (B, L); not normalised."""
        h = h.to(torch.float32)
        p, p_rs = self.attention(h, mask)
        tp = torch.einsum("bl,bld->bd", p, self.value_tp(h))
        rs = torch.einsum("bl,bld->bd", p_rs, self.value_rs(h))
        lang = self.language_mlp(h[:, 0])
        return {"template": tp, "residual": rs, "language": lang, "meaning": self.meaning_mlp(tp + rs)}

    def reconstruct_utterance(self, parts: dict[str, Tensor]) -> Tensor:
        """MLP(emb_lang + emb_tp + emb_rs), the utterance reconstruction (Sec. 3.3)."""
        return self.utterance_decoder(parts["language"] + parts["template"] + parts["residual"])


def fit_langid_centroids(model: nn.Module, parts: Tensor, labels: Tensor) -> Tensor:
    """Store in `model.langid_centroids` each language's normalised mean language part (`parts` (n,
    d), `labels` (n,) the row of each part's language) and return them."""
    cent = torch.zeros_like(model.langid_centroids)
    cent.index_add_(0, labels, parts.to(cent.dtype))
    cent = F.normalize(cent, dim=-1, eps=1e-12)
    model.langid_centroids.copy_(cent)
    return cent


def langid_report(parts: Tensor, labels: Tensor, centroids: Tensor, languages: list[str]) -> dict[str, Any]:
    """Nearest-centroid language identification of held-out language parts against their labels:
    {"accuracy", "per_language" (the languages with rows), "sentences"}."""
    pred = (parts @ centroids.T).argmax(dim=1)
    return {"accuracy": float((pred == labels).float().mean()) if len(labels) else 0.0,
            "per_language": {lang: float((pred[labels == i] == i).float().mean())
                             for i, lang in enumerate(languages) if bool((labels == i).any())},
            "sentences": int(len(labels))}


def pad_batch(states: list) -> tuple[Tensor, Tensor]:
    """Per-sentence (L_i, D) arrays -> padded float32 (B, L, D) and mask (B, L)."""
    longest = max(len(s) for s in states)
    d = states[0].shape[1]
    h = np.zeros((len(states), longest, d), dtype=np.float32)
    m = np.zeros((len(states), longest), dtype=bool)
    for i, s in enumerate(states):
        h[i, :len(s)] = s
        m[i, :len(s)] = True
    return torch.from_numpy(h), torch.from_numpy(m)
