"""FMDA (Fine-grained Multilingual Disentangled Autoencoder) as a torch module, on token states.

Input: the frozen encoder's last hidden states emb_utt (B, L, D) and the padding mask (B, L);
position 0 is the first token (`<s>`, XLM-R's [CLS]). Outputs per sentence (FMDA Sec. 3.1,
Fig. 2), each (B, D):

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
  says it reuses, Sec. 4.2), as `model.Disentangler` reads it. Measured on EN-DE (2,000 train
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
from torch import Tensor, nn

from xmine.disentangle.model import mlp

PARTS = ("meaning", "template", "residual", "language")


#: MLP depth of FMDA projections saved before the spec recorded `layers`
LEGACY_LAYERS = 2


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
        # like model.Disentangler: normalised mean language part per training language (langid)
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
