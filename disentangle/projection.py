"""A trained disentangler on disk, and its numpy face for every xmine command (`--projection`).

Directory layout:
- `config.json`: method (and `base`), model `spec` (dim, architecture, layers, languages, heads),
  the encoder fingerprint, hyper-parameters, training-data summary (files, hashes, counts), loss
  history, held-out language-identification accuracy, provenance.
- `model.safetensors`: every weight and buffer of `model.Disentangler` (incl. langid centroids).
- `manifest.json`: kind `projection` (xmine.artefacts.fileio), format 2: with the size and sha256 of
  config.json, model.safetensors and (a shipped projection) SHIPPED.json, checked on every load
  (`xmine.encoders.projection.projection_files`); written last.
- `.work/`: the trainer's checkpoint (resumable training, `train_checkpoint`: tensors and JSON,
  never a pickle); not needed to use the projection, checked by `verify`.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.mining.langid import identify_by_projection, trust_table
from xmine.disentangle.train_checkpoint import CHECKPOINT, LEGACY, WORK, verify_checkpoint
from xmine.encoders import check_projection_encoder
from xmine.artefacts.fileio import (MANIFEST, MARKER, atomic_path, atomic_write_json, read_manifest, sha256_file,
                                    write_manifest)
from xmine.errors import ArtefactError, ConfigError, OutputError
from xmine.langs import normalize_lang
from xmine.encoders.projection import (
    CONFIG, PROJECTION_FILES, PROJECTION_FORMAT, PROJECTION_KIND as KIND, SHIPPED_INFO, SHIPPED_ROOT, WEIGHTS,
    projection_files, read_projection_json, read_shipped_json, shipped_encoder,
)
from xmine.artefacts.records import FileRecord, ProjectionFingerprint

PARTS = ("meaning", "language")
FMDA_PARTS = ("meaning", "template", "residual", "language")


def save_projection(directory: str | Path, model, config: dict[str, Any]) -> None:
    """Write weights, config and (last) the manifest of a projection into `directory`.

    A projection replaced in place (`train --overwrite`) loses its manifest first, so that one
    stopped half-way is an unfinished run (refused by every reader, resumed by `train`), never new
    weights under the old manifest; and its SHIPPED.json, which describes and calibrates the
    projection it came with (was: kept and listed, so `mine` used its thresholds on the new one)."""
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    bad = non_finite_weight(state)
    if bad is not None:  # a diverged run: such weights would label and project everything as NaN
        raise ConfigError(f"{directory}: weight {bad!r} is not finite (NaN or inf): training diverged; "
                          "not saved (lower --lr)")
    if not (directory / MARKER).is_file():  # (what names a directory without its manifest an unfinished one)
        atomic_write_json(directory / MARKER, {"kind": KIND})
    for name in (MANIFEST, SHIPPED_INFO):
        (directory / name).unlink(missing_ok=True)
    with atomic_path(directory / WEIGHTS) as tmp:
        save_file(state, str(tmp))
    config = dict(config, spec=model.spec, weights_sha256=sha256_file(directory / WEIGHTS))
    atomic_write_json(directory / CONFIG, config)
    write_projection_manifest(directory, config)


def check_not_shipped(out_dir: str | Path) -> None:
    """Refuse an output inside the projections shipped with xmine, which `--projection default`
    loads (was: `train -o` there with --overwrite replaced the default projection)."""
    if SHIPPED_ROOT.resolve() in (target := Path(out_dir).resolve(), *target.parents):
        raise OutputError(f"{out_dir}: lies inside the projections shipped with xmine ({SHIPPED_ROOT}); "
                          "train writes a projection of your own elsewhere")


def write_projection_manifest(directory: str | Path, config: dict[str, Any]) -> None:
    """Write the manifest of the projection in `directory` (its `config`): what it is, and the size
    and sha256 of its files (config.json, model.safetensors, and SHIPPED.json when there is one:
    whoever writes or rewrites SHIPPED.json calls this afterwards)."""
    directory = Path(directory)
    names = PROJECTION_FILES + ((SHIPPED_INFO,) if (directory / SHIPPED_INFO).is_file() else ())
    files = {name: FileRecord(bytes=(directory / name).stat().st_size, sha256=sha256_file(directory / name)).to_dict()
             for name in names}
    write_manifest(directory, KIND, {"method": config["method"], "encoder": config["encoder"],
                                     "dim": int(config["spec"]["dim"]), "languages": config["spec"].get("languages", []),
                                     "provenance": config.get("provenance"), "files": files},
                   format_version=PROJECTION_FORMAT)


def non_finite_weight(state: dict) -> str | None:
    """The name of the first weight or buffer holding NaN or inf, or None."""
    import torch

    for name, value in state.items():
        if torch.is_tensor(value) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            return name
    return None


class Projection:
    """A loaded projection: `transform(emb, part)` -> float32 L2-normalised parts."""

    def __init__(self, path: Path, config: dict[str, Any], model):
        self.path = path
        self.config = config
        self.model = model.eval()
        self.method: str = config["method"]
        self.languages: list[str] = list(config["spec"].get("languages", []))
        self.dim: int = int(config["spec"]["dim"])
        #: FMDA reads the encoder's token states: use `embed_texts`, not `transform`
        self.token_level: bool = config["spec"].get("architecture") == "fmda"
        self.parts: tuple[str, ...] = FMDA_PARTS if self.token_level else PARTS

    def verify(self) -> int:
        """`xmine verify`: every file against its manifest's sha256 (checked again here) and the
        training checkpoint left in `.work/`, if any (it loads as tensors and JSON); a pickled
        checkpoint there is refused (xmine never loads one). The bytes checked."""
        work = Path(self.path) / WORK
        if (work / LEGACY).exists() or (work / LEGACY).is_symlink():
            raise ArtefactError(f"{work / LEGACY}: a pickled training checkpoint (an older xmine's, or planted): "
                                "xmine never loads one; delete it")
        nbytes = projection_files(self.path).check_all()
        for p in (work, work / CHECKPOINT):
            if p.is_symlink():
                raise ArtefactError(f"{p}: a symbolic link (xmine keeps a checkpoint inside the projection); delete it")
        return nbytes + (verify_checkpoint(work / CHECKPOINT) if (work / CHECKPOINT).is_file() else 0)

    def fingerprint(self) -> dict[str, Any]:
        """{"path", "method", "id"[, "shipped"]}: id = hash of the weights (equal ids = same projection);
        "shipped" names the encoder whose default projection, shipped inside xmine, this is. The path is
        absolute: artefacts that record it (stores, OUT.json, an export's record) are read from elsewhere."""
        return ProjectionFingerprint(path=str(Path(self.path).absolute()), method=self.method,
                                     id=self.config["weights_sha256"][:16], shipped=shipped_encoder(self.path)).to_dict()

    def check_encoder(self, encoder_fingerprint: dict[str, Any]) -> None:
        """Raise EncoderMismatchError unless embeddings of `encoder_fingerprint` may go through this projection.

        Those of the encoder it was trained on, at any precision (`xmine.encoders.check_projection_encoder`).
        """
        check_projection_encoder(self.config["encoder"], encoder_fingerprint, what=f"projection {self.path}")

    def _embeddings(self, emb: np.ndarray) -> np.ndarray:
        emb = np.asarray(emb, dtype=np.float32)
        if emb.ndim != 2 or emb.shape[1] != self.dim:
            raise ArtefactError(f"projection {self.path} expects (n, {self.dim}) embeddings, got {emb.shape}")
        return emb

    def _lang_ids(self, lang: str | Sequence[str] | None, n: int):
        import torch

        if lang is None or self.method != "center":  # only `center` uses the language
            return None

        index = {l: i for i, l in enumerate(self.languages)}
        if isinstance(lang, str):
            code = normalize_lang(lang)
            if code not in index:
                logging.getLogger("xmine.disentangle").warning(
                    f"projection {self.path} has no mean for language {lang!r} (it knows "
                    f"{', '.join(self.languages)}): subtracting the nearest language mean instead")
                return None
            return torch.full((n,), index[code], dtype=torch.long)
        try:
            return torch.as_tensor([index[normalize_lang(c)] for c in lang], dtype=torch.long)
        except KeyError as e:
            raise ArtefactError(f"projection {self.path} was not trained on language {e.args[0]!r} "
                                f"(it knows {', '.join(self.languages)})") from None

    def transform(self, emb: np.ndarray, part: str = "meaning", *, lang: str | Sequence[str] | None = None,
                  block_rows: int = 65536) -> np.ndarray:
        """The `part` ("meaning" or "language") of embeddings `emb` (n, dim), float32, rows L2-normalised.

        `lang` (one code or one per row) matters for `center` only: which language mean to
        subtract. Every command passes the language it knows (--lang, --src-lang, a store's);
        without one, or for a language the projection has no mean of (with a warning), the
        nearest mean (the language the embedding looks like).
        """
        import torch
        import torch.nn.functional as F

        if self.token_level:
            raise ArtefactError(f"projection {self.path} ({self.method}) reads the encoder's token states, not "
                                "sentence embeddings: it needs texts (Projection.embed_texts), not vectors")
        if part not in PARTS:
            raise ConfigError(f"part must be one of {PARTS}, not {part!r}")
        emb = self._embeddings(emb)
        out = np.empty_like(emb)
        lang_ids = self._lang_ids(lang, len(emb))
        with torch.no_grad():
            for start in range(0, len(emb), block_rows):
                e = torch.from_numpy(emb[start:start + block_rows])
                ids = None if lang_ids is None else lang_ids[start:start + block_rows]
                x = self.model(e, ids)[PARTS.index(part)]  # (meaning, language)
                out[start:start + len(e)] = F.normalize(x, dim=-1, eps=1e-12).numpy()
        return out

    def embed_texts(self, encoder, sentences: Sequence[str], parts: Sequence[str] = ("meaning",), *,
                    show_progress: bool = False, batch_rows: int = 256) -> dict[str, np.ndarray]:
        """FMDA: {part: (n, dim) float32 L2-normalised} of `sentences`, through the encoder's token path.

        Memory is bounded by the encoder's sort window (token states are never all held).
        """
        import torch
        import torch.nn.functional as F

        from xmine.disentangle.model import pad_batch

        if not self.token_level:
            raise ArtefactError(f"projection {self.path} ({self.method}) works on sentence vectors: use transform")
        bad = [p for p in parts if p not in FMDA_PARTS]
        if bad:
            raise ConfigError(f"parts must be among {FMDA_PARTS}, not {bad}")
        self.check_encoder(encoder.fingerprint())
        sentences = list(sentences)
        out = {p: np.empty((len(sentences), self.dim), dtype=np.float32) for p in parts}
        with torch.no_grad():
            for w in encoder.encode_tokens(sentences, show_progress=show_progress):
                for s in range(0, len(w.index), batch_rows):
                    h, mask = pad_batch(w.tokens[s:s + batch_rows])
                    res = self.model(h, mask)
                    idx = w.index[s:s + batch_rows]
                    for p in parts:
                        out[p][idx] = F.normalize(res[p], dim=-1, eps=1e-12).numpy()
        return out

    def langid(self, emb: np.ndarray) -> tuple[list[str], np.ndarray]:
        """Language of each embedding: nearest training centroid of the language part.

        Returns (codes, cosine to the chosen centroid). `center`'s language part is the nearest
        language mean itself, whose cosine to its own centroid is always 1: there the cosine is
        that of the embedding (same nearest language), so the score still says how close it is.
        A line in a language the projection never saw still gets its nearest language here;
        `xmine.mining.langid.identify_by_projection` says "unknown" instead where that is unreliable.
        """
        if getattr(self.model, "architecture", None) == "centering":
            emb = self._embeddings(emb)
            lang_part = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
        else:
            lang_part = self.transform(emb, "language")
        cent = self.model.langid_centroids.detach().numpy()
        sims = lang_part @ cent.T
        best = sims.argmax(axis=1)
        return [self.languages[i] for i in best], sims[np.arange(len(best)), best]

    def trust_table(self) -> dict[str, dict[str, Any]]:
        """Which of its languages `identify` trusts, and why not (`xmine.mining.langid.trust_table`)."""
        return trust_table(self.config, self.languages)

    def identify(self, emb: np.ndarray, texts=None) -> tuple[list[str], np.ndarray, list[str]]:
        """(labels, scores, nearest): `langid`, with "unknown" where the nearest language is not
        a trusted label, or where `texts` (given) holds no letter (`xmine.mining.langid.identify_by_projection`)."""
        return identify_by_projection(self, emb, texts)


#: config.json's fields every reader uses, and the JSON type each must have
_CONFIG_FIELDS = {"method": str, "encoder": dict, "spec": dict, "weights_sha256": str}
_SPEC_FIELDS = {"dim": int, "languages": list}


def _check_config(config: dict[str, Any], where: Path) -> None:
    """ArtefactError in one line naming `where` and the field when config.json lacks a field the
    readers use or has it of another type."""
    for record, fields, prefix in ((config, _CONFIG_FIELDS, ""), (config.get("spec"), _SPEC_FIELDS, "spec.")):
        for name, want in fields.items():
            value = record.get(name)
            if not isinstance(value, want) or isinstance(value, bool):
                found = "missing" if name not in record else f"{repr(value)[:80]}, not a JSON {_JSON_NAMES[want]}"
                raise ArtefactError(f"{where}: field {prefix + name!r} is {found}; the projection is damaged")
    if config["spec"]["dim"] < 1 or not all(isinstance(code, str) for code in config["spec"]["languages"]):
        raise ArtefactError(f"{where}: field 'spec' has a dimension below 1 or a language that is not a string")


_JSON_NAMES = {str: "string", dict: "object", int: "integer", list: "list"}


def _check_config_agrees(config: dict[str, Any], manifest: dict[str, Any], where: Path) -> None:
    """ArtefactError where config.json says otherwise than the manifest about what the projection
    is (its method, encoder, dimension, languages), or than its own model spec (was: with its sums
    made to agree, an edited method was recorded in every output, and an edited encoder dim refused
    the right embeddings as another encoder's)."""
    def first_difference(name: str, ours: Any, theirs: Any) -> tuple[str, Any, Any]:
        if isinstance(ours, dict) and isinstance(theirs, dict):  # name the field inside (encoder.dim)
            key = next(k for k in sorted({*ours, *theirs}) if ours.get(k) != theirs.get(k))
            return f"{name}.{key}", ours.get(key), theirs.get(key)
        return name, ours, theirs

    def shown(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)[:80]

    checks = [(name, manifest, "manifest.json records") for name in ("method", "encoder", "dim", "languages")]
    checks += [(name, config["spec"], "its spec says") for name in ("dim", "languages")]
    for name, other, said in checks:
        if name in config and name in other and config[name] != other[name]:  # (fields a config may leave out)
            field, ours, theirs = first_difference(name, config[name], other[name])
            raise ArtefactError(f"{where}: field {field!r} is {shown(ours)}, but {said} {shown(theirs)}; the "
                                "projection is damaged")


def _weight_shapes(weights: Path) -> dict[str, list[int]]:
    """The shape of each tensor the safetensors header of `weights` declares (read without loading
    a tensor); ArtefactError naming the file when it is no safetensors file (a pickle, a damaged
    header)."""
    from safetensors import safe_open

    try:
        with safe_open(str(weights), framework="pt") as f:
            return {name: list(f.get_slice(name).get_shape()) for name in f.keys()}
    except Exception as e:  # noqa: BLE001 - SafetensorError, OSError: its own words, then the file's name
        raise _unreadable(weights, e) from None


def _unreadable(weights: Path, e: Exception) -> ArtefactError:
    return ArtefactError(f"{weights}: not a readable safetensors file ({str(e).splitlines()[0][:160]})")


def _check_spec_fits(spec: dict, shapes: dict[str, list[int]], config: Path, weights: Path) -> None:
    """ArtefactError where the spec declares a model larger than its weights: the model is built
    from the spec before the weights are loaded into it, so a spec of dim 60,000, 10^7 layers or
    500,000 languages would allocate gigabytes first (a config.json edited, its sums made to agree).
    A tensor of no elements proves no dimension (was: a [0, 20000] tensor let dim 20000 through)."""
    held = [shape for shape in shapes.values() if all(shape)]
    largest = max((d for shape in held for d in shape), default=0)
    layers = spec.get("layers", 1)
    if spec["dim"] > largest or not isinstance(layers, int) or isinstance(layers, bool) or not 1 <= layers <= len(held):
        raise ArtefactError(f"{config}: its spec (dim {spec['dim']}, layers {layers!r}) declares more than {weights} "
                            f"holds ({len(held)} tensors, the largest dimension {largest}); the projection is damaged")
    languages = spec.get("languages", [])
    centroids = shapes.get("langid_centroids")  # (n_languages, dim): every model holds it
    if not isinstance(languages, list) or (centroids is not None and centroids[0] != max(1, len(languages))):
        raise ArtefactError(f"{config}: its spec names {len(languages) if isinstance(languages, list) else '?'} "
                            f"languages, but {weights} holds centroids of {centroids[0] if centroids else '?'}; the "
                            "projection is damaged")


def load_projection(path: str | Path) -> Projection:
    """Load a projection directory written by `xmine train` (refuses other artefacts)."""
    from safetensors.torch import load_file

    from xmine.disentangle.model import FMDA, Disentangler

    if not isinstance(path, (str, os.PathLike)) or not str(path):  # (was: a TypeError from os.fspath)
        raise ConfigError(f"a projection is named by its directory (got {path!r})")
    path = Path(path)
    content = projection_files(path)  # every file's sha256, as the manifest records them
    content.check_all()
    config = read_projection_json(path, CONFIG)
    _check_config(config, path / CONFIG)
    if (path / SHIPPED_INFO).is_file():
        read_shipped_json(path)  # an object, its thresholds numbers
    weights = path / WEIGHTS
    if content.expected[WEIGHTS].sha256 != config["weights_sha256"]:  # (the file's sha256, checked above)
        raise ArtefactError(f"{weights}: weights do not match config.json (corrupt or replaced)")
    _check_spec_fits(config["spec"], _weight_shapes(weights), path / CONFIG, weights)
    _check_config_agrees(config, read_manifest(path, KIND), path / CONFIG)
    try:
        model = (FMDA if config["spec"].get("architecture") == "fmda" else Disentangler)(config["spec"])
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as e:
        raise ArtefactError(f"{path / CONFIG}: its model spec cannot be built ({type(e).__name__}: "
                            f"{str(e)[:120]})") from None
    try:
        state = load_file(str(weights))
    except Exception as e:  # noqa: BLE001 - SafetensorError and the like: a file its sums vouch for, yet not one
        raise _unreadable(weights, e) from None
    bad = non_finite_weight(state)
    if bad is not None:
        raise ArtefactError(f"{weights}: weight {bad!r} is not finite (NaN or inf): a diverged training run; "
                            "train it again (lower --lr)")
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:  # one line: torch lists every mismatch on a line of its own
        problems = [line.strip() for line in str(e).splitlines()[1:] if line.strip()] or [str(e).strip()]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ArtefactError(f"{weights}: weights do not fit the model in config.json: {problems[0][:300]}{more}") from None
    return Projection(path, config, model)
