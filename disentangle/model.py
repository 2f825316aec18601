"""The disentangler as a torch module: frozen-encoder embedding -> (meaning, language) parts.

Three architectures cover the methods (see `methods.py`):
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
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ARCHITECTURES = ("two_networks", "residual", "centering")


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
