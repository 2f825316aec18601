"""A local model folder given as `--encoder DIR`: what is wrong with one that does not load, and
whether one that loads can embed what its tokenizer gives it.

sentence-transformers and transformers report a broken folder in their own terms: a bare
`JSONDecodeError` for a damaged `modules.json`, "Should have a `model_type` key" for an empty
folder, "look at the above report" where no report is shown, or an IndexError deep in the
forward pass for a tokenizer whose ids run past the model's vocabulary. `folder_problem` names the
file and the problem; `check_vocabulary` refuses the last before anything is encoded.
"""

from __future__ import annotations

import json
from pathlib import Path

from xmine.errors import EncoderError

#: the most characters of a library's message quoted where no file is to blame
_QUOTED = 300
#: files one of which a model folder's tokenizer, and its weights, are read from
_TOKENIZER_FILES = {"tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model"}
_WEIGHT_FILES = {"model.safetensors", "pytorch_model.bin"}


def layout_problem(folder: Path, *, read_json: bool = True) -> str | None:
    """What the files of the model folder `folder` show to be wrong (none, no config.json, no
    tokenizer or weights; `read_json`: a JSON file that does not parse, a module folder missing),
    or None. Without `read_json`, what a command checks before it claims its output (was: once
    loading failed, after the projection's notice): files, and a transformer's config.json,
    tokenizer and weights where there is one."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    if not files:
        return "the folder holds no files (a model folder has config.json and weights, a sentence-transformers one modules.json too)"
    for path in files if read_json else ():
        if path.suffix == ".json":
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError) as e:
                return f"{path}: not valid JSON ({e})"
    modules = folder / "modules.json"
    try:
        listed = json.loads(modules.read_text(encoding="utf-8")) if modules.is_file() else []
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return f"{modules}: not valid JSON ({e})"
    for module in listed if isinstance(listed, list) and read_json else ():  # (before loading: hub models
        where = module.get("path") if isinstance(module, dict) else None  # ship without an empty 2_Normalize/)
        if isinstance(where, str) and where and not (folder / where).is_dir():
            return f"{folder / where}: missing (modules.json names it as a module folder)"
    kinds = [str(m.get("type")) for m in (listed if isinstance(listed, list) else ()) if isinstance(m, dict)]
    if not read_json and modules.is_file() and not any("Transformer" in kind for kind in kinds):
        return None  # (modules of another kind, a static embedding's: what they need, loading says)
    names = {p.name for p in files}
    transformer = _transformer_folder(folder)
    if not (transformer / "config.json").is_file():
        return f"{transformer / 'config.json'}: missing (the transformer's configuration)"
    if (why := tokenizer_missing(folder)) is not None:
        return why
    if not names & _WEIGHT_FILES and not any(".safetensors" in n or n.endswith(".bin") for n in names):
        return f"no weights in it (none of {', '.join(sorted(_WEIGHT_FILES))})"
    return None


def folder_problem(folder: Path, error: BaseException) -> str:
    """What is wrong with the model folder `folder`, which failed to load with `error`: the file
    and the problem where the folder shows it, else the library's message (its first line)."""
    if (why := layout_problem(folder)) is not None:
        return why
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    text = f"{type(error).__name__}: {str(error).strip()}"
    if "safetensors" in text.lower() or "Safetensor" in type(error).__name__:
        weights = [p.name for p in files if p.suffix == ".safetensors"]
        return f"{folder / weights[0] if weights else folder}: unreadable weights ({text.splitlines()[0]})"
    if "size mismatch" in text or "ignore_mismatched_sizes" in text:
        return "its weights do not have the shapes its config.json gives (a config of another model size?)"
    first = text.splitlines()[0]
    return first if len(first) <= _QUOTED else first[:_QUOTED].rsplit(" ", 1)[0] + " ..."


def tokenizer_missing(folder: Path) -> str | None:
    """Why the model folder `folder` has no tokenizer of its own, or None. (A folder without one
    loads: transformers falls back to a 5-token tokenizer, every word then [UNK], and the model
    embeds every sentence alike; was: embedded without a word.)"""
    names = {p.name for p in folder.rglob("*") if p.is_file()}
    if names & _TOKENIZER_FILES or any(n.endswith(".model") for n in names):
        return None
    return f"no tokenizer in it (none of {', '.join(sorted(_TOKENIZER_FILES))}, nor a sentencepiece .model)"


def unloaded_weights(folder: Path, model) -> list[str]:
    """The tensors of `model` (the transformer loaded from the model folder `folder`) that no weights
    file of it holds: transformers fills them with fresh random values on every load and says so
    only in its log. Only safetensors weights are read (their header: the tensors' names); [] where
    there are none or they cannot be read (the load refused those)."""
    from safetensors import safe_open

    saved: set[str] = set()
    files = sorted(_transformer_folder(folder).glob("*.safetensors"))
    if not files:
        return []
    for file in files:
        try:
            with safe_open(str(file), "np") as weights:
                saved.update(weights.keys())
        except Exception:
            return []
    prefix = f"{getattr(model, 'base_model_prefix', '') or '?'}."  # (a head model's checkpoint: "bert.encoder...")
    saved |= {name.removeprefix(prefix) for name in saved}
    return [name for name in model.state_dict() if name not in saved and name.removeprefix(prefix) not in saved]


def unused_by_pooling(name: str) -> bool:
    """Whether the tensor `name` of a transformer plays no part in a sentence-transformers embedding:
    BERT's pooler (sentence-transformers pools the token states), which models saved without it
    load at random, harmlessly."""
    return name.startswith("pooler.")


def _transformer_folder(folder: Path) -> Path:
    """The folder of a model folder's transformer: the module modules.json names as one (0_Transformer/
    in older sentence-transformers models, the folder itself in newer ones), else the folder."""
    try:
        listed = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return folder
    for module in listed if isinstance(listed, list) else ():
        if isinstance(module, dict) and "Transformer" in str(module.get("type")) and isinstance(module.get("path"), str):
            return folder / module["path"]
    return folder


def check_vocabulary(name: str, tokenizer, model) -> None:
    """EncoderError where `tokenizer` gives ids the model has no embedding for (a tokenizer of
    another model saved beside it): every sentence would fail in the forward pass."""
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    rows = getattr(embeddings, "num_embeddings", None)
    if rows is not None and len(tokenizer) > rows:
        raise EncoderError(f"encoder {name!r}: its tokenizer has {len(tokenizer):,} tokens but the model embeds "
                           f"{rows:,} (vocab_size); the tokenizer is another model's")


__all__ = ["check_vocabulary", "folder_problem", "tokenizer_missing", "unloaded_weights", "unused_by_pooling"]
