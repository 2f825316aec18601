"""What the core needs of a projection, and where a `--projection` option is resolved.

A projection maps encoder embeddings to a part of them ("meaning" or "language"); the trained
disentanglers of `xmine.disentangle` are one implementation. The core (store writer, input
layer) only calls the three methods of `ProjectionLike`, so it never imports the feature
package: a projection DIRECTORY is opened through the artefact reader registered for the
kind "projection" (see `xmine.plugins`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from xmine.plugins import open_artefact

PROJECTION_KIND = "projection"


@runtime_checkable
class ProjectionLike(Protocol):
    """A map from encoder embeddings to one of their parts."""

    def transform(self, emb: np.ndarray, part: str = "meaning", *, lang: str | None = None) -> np.ndarray:
        """(n, dim) embeddings -> (n, d') float32 rows of `part`, L2-normalised. `lang`: the
        language of the rows when the caller knows it (a language-dependent projection such as
        `center` uses it; others ignore it)."""

    def fingerprint(self) -> dict[str, Any]:
        """What identifies it: {"path", "method", "id"}; equal ids mean the same projection."""

    def check_encoder(self, encoder_fingerprint: dict[str, Any]) -> None:
        """Raise `EncoderMismatchError` unless it applies to that encoder's embeddings."""


def resolve_projection(projection: "ProjectionLike | str | Path | None") -> ProjectionLike | None:
    """None, a loaded projection, or a projection directory (opened and validated) -> the projection."""
    if projection is None or isinstance(projection, ProjectionLike):
        return projection  # type: ignore[return-value]
    return open_artefact(projection, PROJECTION_KIND)


__all__ = ["PROJECTION_KIND", "ProjectionLike", "resolve_projection"]
