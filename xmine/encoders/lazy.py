"""`LazyEncoder`: an encoder whose model is loaded on first use.

A process that only hands the encoding to Ray actors (`embed --ray`, `train --ray`) needs the
encoder's name, precision, runtime, dimension and fingerprint, not its model; loading me5-small costs
seconds of imports and weights that every actor pays again. For me5-small all four come from its
manifest (`me5_fingerprint`), and `load_encoder` checks that the loaded model has exactly that
fingerprint. For other encoders the dimension and fingerprint load the model. Anything else
(`encode`, `truncated`, the tokenizer, ...) loads it too, so a LazyEncoder works wherever an
encoder does.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from xmine.encoders.base import ME5_DEFAULT_PREFIX, Encoder
from xmine.encoders.loader import check_device, encoder_precision, load_encoder_now
from xmine.encoders.me5 import me5_fingerprint
from xmine.encoders.prompts import asked_prompt
from xmine.encoders.runtime import encoder_runtime
from xmine.encoders.transformer import pick_device


class LazyEncoder(Encoder):
    """`load_encoder(name, ...)`, loaded when first used (see the module doc)."""

    def __init__(self, name: str, *, device: str | None = None, prefix: str | None = None,
                 threads: int | None = None, precision: str = "auto", runtime: str | None = None,
                 prompt_name: str | None = None):
        check_device(device)
        prefix, prompt_name = asked_prompt(prefix, prompt_name)  # the command line's, in this process
        self.name = name
        self.precision = encoder_precision(name, precision, device=device)  # validates it, too
        self.runtime = encoder_runtime(name, runtime, self.precision,
                                       device="cpu" if name == "use-m3" else pick_device(device))
        self._load_kwargs = dict(device=device, prefix=prefix, prompt_name=prompt_name, threads=threads,
                                 precision=self.precision, runtime=self.runtime)
        self._fingerprint = (me5_fingerprint(prefix=ME5_DEFAULT_PREFIX if prefix is None else prefix,
                                             precision=self.precision, runtime=self.runtime)
                             if name == "me5-small" else None)
        self._encoder: Encoder | None = None

    @property
    def loaded(self) -> bool:
        """Whether the model has been loaded in this process."""
        return self._encoder is not None

    def model(self) -> Encoder:
        """The loaded encoder (loading it now if needed)."""
        if self._encoder is None:
            self._encoder = load_encoder_now(self.name, **self._load_kwargs)
        return self._encoder

    @property
    def dim(self) -> int:  # type: ignore[override]
        return int(self._fingerprint["dim"]) if self._fingerprint else self.model().dim

    @property
    def prefix(self) -> str:
        """The prompt (me5-small's known without loading it)."""
        if self._fingerprint is not None and self._load_kwargs["prompt_name"] is None:
            return ME5_DEFAULT_PREFIX if self._load_kwargs["prefix"] is None else self._load_kwargs["prefix"]
        return self.model().prefix

    @property
    def max_tokens(self) -> int | None:  # type: ignore[override]
        return self.model().max_tokens

    def fingerprint(self) -> dict[str, Any]:
        return dict(self._fingerprint) if self._fingerprint else self.model().fingerprint()

    def encode(self, sentences: Sequence[str], *, batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        return self.model().encode(sentences, batch_size=batch_size, show_progress=show_progress)

    def truncated(self, sentences: Sequence[str]) -> np.ndarray:
        return self.model().truncated(sentences)

    def __getattr__(self, attr: str) -> Any:
        # Only called for attributes a LazyEncoder lacks (tokenizer, device, ...): the model's.
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self.model(), attr)
