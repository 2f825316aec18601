"""`xmine export-st`: a projection as a plain sentence-transformers model that loads without xmine.

A projection whose meaning network is one linear layer (the shipped one: `residual`, 1 layer;
`two_networks` with 1 layer likewise) is exactly what sentence-transformers' own modules
compute: Transformer -> Pooling -> Normalize (xmine's encoders L2-normalise before projecting)
-> Dense (the meaning layer, identity activation) -> Normalize. The folder holds only those
standard modules, so `SentenceTransformer(OUT)` needs sentence-transformers and nothing of
xmine, and gives the vectors `xmine mine` compares (the encoder's text prefix, "query: " for
me5-small, is the default prompt). Its README.md says what made it. Deeper or token-level
projections need xmine's own module (`st_module.export_sentence_transformer`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from xmine import __version__
from xmine.artefacts.directory import atomic_dir, git_commit, provenance
from xmine.disentangle.projection import load_projection
from xmine.encoders import load_encoder
from xmine.encoders.e5_q4 import ensure_me5_model
from xmine.encoders.exported import EXPORT_RECORD, PORTABLE_KIND
from xmine.encoders.transformer import library_quiet
from xmine.encoders.projection import SHIPPED_INFO, read_projection_json
from xmine.errors import ConfigError, EncoderError
from xmine.artefacts.fileio import FILE_MODE, MANIFEST, sha256_file, write_manifest
from xmine.artefacts.input_artefacts import encoding_prompt
from xmine.artefacts.records import FileRecord
from xmine.artefacts.outputs import claim_output

#: The manifest of an export records the size and sha256 of every file in it from format 2 on
#: (`xmine verify` checks them: xmine.artefacts.verify.check_recorded_files).
EXPORT_FORMAT = 2

CARD = """
## Made by xmine

This model is `{encoder}` followed by the meaning part of the xmine projection `{projection_id}`
({method}), written by `xmine export-st` (xmine {version}, commit {commit}). The projection is one
linear layer, stored as a standard `Dense` module between two `Normalize` modules, so the model
loads with sentence-transformers alone. Its vectors are the ones `xmine mine` compares (the
encoder's prefix `{prefix}` is the default prompt, and the `query` and `document` prompts too:
`encode`, `encode_query` and `encode_document` give the same vectors, as xmine encodes every side
alike). How the projection was trained:
`xmine_projection.json`, which holds the projection's own `config.json` (`config`) and, for a
projection xmine ships, how it was calibrated (`shipped`, its `SHIPPED.json`).
"""


def _linear_meaning(projection):
    """The meaning network's one linear layer, or ConfigError saying why there is none."""
    import torch.nn as nn

    model = projection.model
    own = ("export it with xmine's own module instead (xmine.disentangle.st_module.export_sentence_transformer, "
           "docs/disentangle.md)")
    if projection.token_level:  # (FMDA's model has no `architecture`: it was read here, a traceback)
        raise ConfigError(f"{projection.path}: an FMDA projection reads the encoder's token states, which standard "
                          f"sentence-transformers modules cannot express; {own}")
    layers = [m for m in (getattr(model, "meaning", None) or []) if isinstance(m, nn.Module)]
    if model.architecture not in ("residual", "two_networks") or len(layers) != 1 or \
            not isinstance(layers[0], nn.Linear):
        raise ConfigError(f"{projection.path}: its meaning part is not one linear layer ({model.architecture}, "
                          f"layers {projection.config['spec'].get('layers')}), which standard modules cannot express; "
                          f"{own}")
    return layers[0]


def base_model(projection, encoder_name: str, *, prompt: str | None = None, prompt_name: str | None = None):
    """(the encoder as a SentenceTransformer, its prompts, the default prompt's name): the fp32
    torch weights of `encoder_name`, which must be the projection's encoder (EncoderMismatchError
    otherwise), with the encoder's text prefix as the default prompt: `prompt` or the prompt named
    `prompt_name` where the projection was trained with one (None: the encoder's default)."""
    from sentence_transformers import SentenceTransformer

    # The exported pipeline runs the fp32 torch weights (its users pick their own dtype); a projection
    # trained at another precision or runtime of them is accepted (xmine.encoders.check_projection_encoder).
    encoder = load_encoder(encoder_name, device="cpu", precision="fp32", runtime="torch", prefix=prompt,
                           prompt_name=prompt_name)
    projection.check_encoder(encoder.fingerprint())
    if encoder_name == "use-m3":
        raise EncoderError("use-m3 is not a sentence-transformers model; only those can be exported with a projection")
    with library_quiet():
        if encoder_name == "me5-small":
            path, _ = ensure_me5_model()  # the rebuilt sentence-transformers folder the encoder itself loads
            st = SentenceTransformer(str(path), device="cpu")
        else:
            st = SentenceTransformer(encoder_name, device="cpu")
    prompts = dict(st.prompts or {})
    default = None
    prefix = getattr(encoder, "prefix", "") or ""
    if prefix:  # e.g. multilingual-e5's "query: ": make it the default so encode() matches xmine's
        default = next((k for k, v in prompts.items() if v == prefix), "xmine_prefix")
        prompts[default] = prefix
    # encode_query and encode_document (the model card's usage) apply the prompts named "query" and
    # "document": both xmine's, which encodes every side alike (was: encode_document applied e5's own
    # "document" prompt, "", vectors of cosine 0.96-0.997 to the ones xmine compares)
    prompts.update(query=prefix, document=prefix)
    return st, prompts, default


def save_export(model, tmp: Path, kind: str, projection, *, part: str, card: str, parameters: dict) -> None:
    """Write an exported `model` into the folder `tmp`: its modules, `card` after its README.md,
    `xmine_projection.json` and a manifest of `kind` (its provenance records `parameters`) that
    records the size and sha256 of every other file, by its path relative to `tmp`."""
    with library_quiet():  # (its "Writing model shards" bar: xmine says what it exported)
        model.save(str(tmp))
    if card:
        readme = Path(tmp) / "README.md"
        text = readme.read_text(encoding="utf-8") if readme.is_file() else ""
        readme.write_text(text + card, encoding="utf-8")
    fingerprint = projection.fingerprint()
    # the projection's training record travels with it (was: the card named a config.json left behind)
    shipped = (Path(projection.path) / SHIPPED_INFO).is_file()
    (Path(tmp) / EXPORT_RECORD).write_text(
        json.dumps({"projection": fingerprint, "encoder": projection.config["encoder"], "part": part,
                    "config": projection.config,
                    **({"shipped": read_projection_json(projection.path, SHIPPED_INFO)} if shipped else {})},
                   indent=2) + "\n", encoding="utf-8")
    paths = {p.relative_to(tmp).as_posix(): p for p in Path(tmp).rglob("*") if p.is_file()}
    for p in paths.values():  # (safetensors writes through mkstemp: 0600, unlike the files beside it)
        os.chmod(p, FILE_MODE)
    files = {rel: FileRecord(bytes=p.stat().st_size, sha256=sha256_file(p)).to_dict()
             for rel, p in sorted(paths.items()) if rel != MANIFEST}
    write_manifest(tmp, kind, {"projection": fingerprint, "part": part, "files": files,
                               "provenance": provenance(**parameters)}, format_version=EXPORT_FORMAT)


def export_portable(projection_dir: str | Path, out_dir: str | Path, *, overwrite: bool = False,
                    prompt: str | None = None, prompt_name: str | None = None):
    """Write the encoder + the projection's linear meaning layer as standard sentence-transformers
    modules into `out_dir` (claimed like every output: new, or an earlier export with `overwrite`).
    `prompt`/`prompt_name`: the encoder's prompt the projection was trained with, where not its
    default; it becomes the exported model's default prompt."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize
    from torch import nn

    out_dir = Path(out_dir)
    with claim_output(out_dir, kind=PORTABLE_KIND, form="dir", inputs=[projection_dir], overwrite=overwrite):
        projection = load_projection(projection_dir)
        linear = _linear_meaning(projection)
        name = projection.config["encoder"]["name"]
        prompt = encoding_prompt(prompt, prompt_name, (projection_dir,))
        st, prompts, default = base_model(projection, name, prompt=prompt, prompt_name=prompt_name)
        modules = list(st)
        if not isinstance(modules[-1], Normalize):
            modules.append(Normalize())
        dense = Dense(linear.in_features, linear.out_features, bias=linear.bias is not None,
                      activation_function=nn.Identity(), init_weight=linear.weight.detach().clone(),
                      init_bias=None if linear.bias is None else linear.bias.detach().clone())
        with library_quiet():
            model = SentenceTransformer(modules=[*modules, dense, Normalize()], device="cpu", prompts=prompts,
                                        default_prompt_name=default)
        card = CARD.format(encoder=name, projection_id=projection.fingerprint()["id"], method=projection.method,
                           version=__version__, commit=git_commit(), prefix=prompts.get(default, "") if default else "")
        with atomic_dir(out_dir, kind=PORTABLE_KIND, overwrite=overwrite) as tmp:
            # the weights written: fp32 torch, whatever the projection was trained on (its record's
            # `encoder`), with the prompt made the default (was: neither recorded)
            save_export(model, tmp, PORTABLE_KIND, projection, part="meaning", card=card,
                        parameters={"encoder": name, "projection": str(Path(projection.path).resolve()),
                                    "precision": "fp32", "runtime": "torch",
                                    "prompt": prompts.get(default) if default else None})
        return model


__all__ = ["EXPORT_FORMAT", "PORTABLE_KIND", "base_model", "export_portable", "save_export"]
