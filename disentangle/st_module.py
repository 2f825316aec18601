"""The projection as a sentence-transformers module, so any tool can use meaning embeddings.

`MeaningProjection` (a `sentence_transformers` Module, i.e. a torch.nn.Module with `save(path)`
and the classmethod `load(path, ...)`) reads `features["sentence_embedding"]`, L2-normalises it
(as xmine's encoders do), replaces it by the chosen part (meaning or language) and normalises
again. Put it last: `SentenceTransformer(modules=[*encoder_modules, MeaningProjection(...)])`.
Saved models list it in modules.json by its class path
`xmine.disentangle.st_module.MeaningProjection`, so loading needs xmine installed, nothing else.
sentence-transformers >= 6 imports a module class from outside its own package only when asked:
load with `SentenceTransformer(path, trust_remote_code=True)` (the code comes from the installed
xmine package, not from the model folder).

`FMDAProjection` is the same for an FMDA projection, which reads the Transformer module's token
embeddings instead of the pooled vector (see its docstring); the exported model's README.md
says so.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from sentence_transformers.base.modules.module import Module

from xmine.artefacts.directory import atomic_dir
from xmine.disentangle.model import FMDA, FMDA_PARTS, Disentangler
from xmine.disentangle.projection import load_projection
from xmine.disentangle.st_export import base_model, save_export
from xmine.encoders.transformer import library_quiet
from xmine.errors import ConfigError, EncoderError
from xmine.artefacts.outputs import claim_output


class _SavedProjectionModule(Module):
    """What the two sentence-transformers modules share: the output dimension, and saving and
    loading the config and the network's weights (`_network`: the attribute holding it)."""

    config_keys = ["part", "spec", "method", "projection_id", "encoder"]
    _network = ""
    _default_method = ""
    _parts: tuple[str, ...] = ()

    def __init__(self, spec: dict[str, Any], *, part: str = "meaning", method: str = "", projection_id: str = "",
                 encoder: dict[str, Any] | None = None):
        super().__init__()
        if part not in self._parts:  # (was: a ValueError, after the encoder was built)
            raise ConfigError(f"part must be one of {', '.join(self._parts)}, not {part!r}")
        self.part, self.spec, self.method = part, spec, method or self._default_method
        self.projection_id, self.encoder = projection_id, encoder or {}

    @classmethod
    def from_projection(cls, projection, *, part: str = "meaning"):
        """Wrap a loaded `Projection` (xmine.disentangle.load_projection)."""
        module = cls(projection.config["spec"], part=part, method=projection.method,
                     projection_id=projection.fingerprint()["id"], encoder=projection.config["encoder"])
        getattr(module, cls._network).load_state_dict(projection.model.state_dict())
        return module.eval()

    def get_embedding_dimension(self) -> int:
        return int(self.spec["dim"])

    get_sentence_embedding_dimension = get_embedding_dimension

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        os.makedirs(output_path, exist_ok=True)
        self.save_config(output_path)
        network = getattr(self, self._network)
        state = {k: v.detach().contiguous().clone() for k, v in network.state_dict().items()}
        save_file(state, os.path.join(output_path, "model.safetensors"))

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token=None, cache_folder=None, revision=None,
             local_files_only: bool = False, **kwargs):
        hub = dict(subfolder=subfolder, token=token, cache_folder=cache_folder, revision=revision,
                   local_files_only=local_files_only)
        config = cls.load_config(model_name_or_path, **hub)
        module = cls(config["spec"], part=config.get("part", "meaning"),
                     method=config.get("method", cls._default_method), projection_id=config.get("projection_id", ""), encoder=config.get("encoder"))
        weights = cls.load_file_path(model_name_or_path, filename="model.safetensors", **hub)
        if weights is None:
            raise EncoderError(f"{model_name_or_path}/{subfolder}: {cls.__name__} has no model.safetensors")
        getattr(module, cls._network).load_state_dict(load_file(weights), strict=True)
        return module.eval()


class MeaningProjection(_SavedProjectionModule):
    """A disentangler inside a SentenceTransformer: sentence_embedding -> its meaning (or language) part."""

    _network = "disentangler"
    _parts = ("meaning", "language")

    def __init__(self, spec: dict[str, Any], **kwargs):
        super().__init__(spec, **kwargs)
        self.disentangler = Disentangler(spec)

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        e = F.normalize(features["sentence_embedding"], dim=-1, eps=1e-12)
        m, l = self.disentangler(e.to(torch.float32))
        features["sentence_embedding"] = F.normalize(m if self.part == "meaning" else l, dim=-1, eps=1e-12)
        return features


class FMDAProjection(_SavedProjectionModule):
    """FMDA inside a SentenceTransformer: token_embeddings + attention_mask -> one of its four parts.

    Unlike `MeaningProjection` it reads the Transformer module's TOKEN states
    (`features["token_embeddings"]`, the last hidden states, and `features["attention_mask"]`),
    not the pooled sentence vector, so the pipeline must keep them: Transformer -> Pooling
    [-> Normalize] -> FMDAProjection (sentence-transformers passes token_embeddings through).
    """

    _network = "fmda"
    _default_method = "fmda"
    _parts = FMDA_PARTS

    def __init__(self, spec: dict[str, Any], **kwargs):
        super().__init__(spec, **kwargs)
        self.fmda = FMDA(spec)

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        if "token_embeddings" not in features or "attention_mask" not in features:
            raise EncoderError("FMDAProjection needs the Transformer module's token_embeddings and attention_mask "
                               "(put it after Transformer and Pooling)")
        parts = self.fmda(features["token_embeddings"].to(torch.float32), features["attention_mask"])
        features["sentence_embedding"] = F.normalize(parts[self.part], dim=-1, eps=1e-12)
        return features


FMDA_MODEL_CARD = """
## xmine FMDA projection: needs the encoder's token states

The last module of this model, `xmine.disentangle.st_module.FMDAProjection`, is an FMDA
(Fine-grained Multilingual Disentangled Autoencoder) trained by `xmine train --method fmda`. It
does not read the pooled sentence embedding: it reads the Transformer module's **token
embeddings** (last hidden states, L x D) and the attention mask, and outputs the `{part}` part
(one of meaning, template, residual, language), L2-normalised. Keep the Transformer module
before it and do not drop `token_embeddings` from the features (sentence-transformers keeps
them by default). Load with `SentenceTransformer(path, trust_remote_code=True)` and xmine
installed. Projection id: `{projection_id}`; encoder: `{encoder}`.
"""


EXPORT_KIND = "sentence-transformer-export"


def export_sentence_transformer(projection_dir: str | Path, encoder_name: str, out_dir: str | Path, *,
                                part: str = "meaning", overwrite: bool = False):
    """Save `encoder_name` + the projection as one SentenceTransformer model in `out_dir`; return it.

    The encoder must be the one the projection was trained on (EncoderMismatchError otherwise).
    The encoder's text prefix (me5-small: "query: ") becomes the model's default prompt, so
    `SentenceTransformer(out_dir).encode(sentences)` gives what xmine's encoder + projection give.
    `out_dir` must be new or empty, or (with `overwrite`) an earlier export, replaced atomically;
    its `manifest.json` marks it as one.
    """
    from sentence_transformers import SentenceTransformer

    with claim_output(out_dir, kind=EXPORT_KIND, form="dir", inputs=[projection_dir], overwrite=overwrite):
        projection = load_projection(projection_dir)
        head = (FMDAProjection if projection.token_level else MeaningProjection).from_projection(projection, part=part)
        st, prompts, default = base_model(projection, encoder_name)
        with library_quiet():
            model = SentenceTransformer(modules=[*st, head], device="cpu", prompts=prompts, default_prompt_name=default)
        card = FMDA_MODEL_CARD.format(part=part, projection_id=projection.fingerprint()["id"],
                                      encoder=projection.config["encoder"].get("name")) if projection.token_level else ""
        with atomic_dir(out_dir, kind=EXPORT_KIND, overwrite=overwrite) as tmp:
            save_export(model, tmp, EXPORT_KIND, projection, part=part, card=card,
                        parameters={"encoder": encoder_name, "part": part})
        return model
