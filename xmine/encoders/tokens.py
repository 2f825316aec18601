"""The encoder's token-level output: per sentence the last hidden states (L x D), for FMDA.

Methods such as FMDA read the frozen encoder's token states, not its pooled sentence vector.
`encode_token_states` runs a `TokenBatchedEncoder` the way `encode` does (tokenize a window,
sort by token length, fill each pass up to the token budget) and yields, window by window,
each sentence's hidden states (float16, special tokens included: position 0 is the first
token, `<s>`/`[CLS]`) and its pooled vector (float32, NOT normalised: the encoder's own pooling
of those states, so the sentence vector and its tokens come from one forward pass).

`mask_spans` replaces the tokens overlapping given character spans of a sentence by the
tokenizer's mask token before the forward pass (FMDA's template/residual targets, Sec. 3.3).
Spans are in the sentence's own characters; the encoder's prefix ("query: ") is accounted for.

`TokenStore` keeps token states on disk for training: one flat float16 array of all tokens
(memory-mapped), offsets, pooled vectors and a manifest. Memory while building is bounded by the
encoder's sort window; while training, by the pages of the batches read. Stores live in
`$XMINE_HOME/tokens/`, keyed by the encoder fingerprint and a hash of the sentences and masks, so
reruns (another seed, another method) encode nothing again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from xmine.artefacts.directory import atomic_dir
from xmine.io.corpus import DEFAULT_MAX_CHARS
from xmine.encoders.embed_cache import EmbeddingCache, _key
from xmine.encoders.batching import token_batches
from xmine.errors import ArtefactError, DamagedManifestError, EncoderError
from xmine.artefacts.fileio import atomic_write_manifest, load_manifest
from xmine.paths import xmine_home

Spans = Sequence[tuple[int, int]]


@dataclass(kw_only=True)
class TokenWindow:
    """Token states of the sentences `index` (positions in the input list)."""

    index: np.ndarray
    #: per sentence (L_i, D) float16 (None when `keep_tokens=False`)
    tokens: list[np.ndarray] | None
    #: (n, D) float32 pooled vectors, not normalised
    pooled: np.ndarray


def token_ids(encoder, sentences: Sequence[str], mask_spans: Sequence[Spans] | None = None) -> list[list[int]]:
    """The token ids of each sentence as `encoder` (a `TokenBatchedEncoder`) feeds it to its model: its
    prefix before it, special tokens added, cut at its `max_length`; `mask_spans` (`mask_spans` in the
    module doc): the tokens overlapping each sentence's spans replaced by the mask token."""
    tok = encoder.tokenizer
    prefix = encoder.prefix
    texts = [prefix + s for s in sentences]
    if mask_spans is None:
        return tok(texts, truncation=True, max_length=encoder.batching.max_length, add_special_tokens=True,
                   return_attention_mask=False, return_token_type_ids=False)["input_ids"]
    if not getattr(tok, "is_fast", False):
        raise EncoderError(f"{encoder.name}: masking spans needs a fast tokenizer (character offsets)")
    if tok.mask_token_id is None:
        raise EncoderError(f"{encoder.name}: the tokenizer has no mask token, so spans cannot be masked")
    enc = tok(texts, truncation=True, max_length=encoder.batching.max_length, add_special_tokens=True,
              return_attention_mask=False, return_token_type_ids=False, return_offsets_mapping=True)
    out = []
    shift = len(prefix)
    for ids, offsets, spans in zip(enc["input_ids"], enc["offset_mapping"], mask_spans):
        ids = list(ids)
        for k, (a, b) in enumerate(offsets):
            if b <= a or b <= shift:  # special tokens have empty spans; prefix tokens are never masked
                continue
            a, b = a - shift, b - shift
            # SentencePiece offsets include the leading space: "▁five" starting at the space before
            # "five" still overlaps a slot "five am" because its end lies inside the slot.
            if any(a < e and b > s for s, e in spans):
                ids[k] = tok.mask_token_id
        out.append(ids)
    return out


def encode_token_states(encoder, sentences: Sequence[str], *, mask_spans: Sequence[Spans] | None = None,
                        keep_tokens: bool = True, show_progress: bool = False,
                        desc: str = "token states") -> Iterator[TokenWindow]:
    """Yield `TokenWindow`s covering `sentences` (see the module doc); needs a `TokenBatchedEncoder`
    (run by torch or OpenVINO: both give the last hidden states)."""
    from tqdm.auto import tqdm

    require_token_states(encoder)
    sentences = list(sentences)
    if mask_spans is not None and len(mask_spans) != len(sentences):
        raise ValueError("mask_spans needs one entry per sentence")
    window = encoder.batching.sort_window
    budget = encoder.batching.token_budget
    with tqdm(total=len(sentences), desc=desc, unit="sent", disable=not show_progress, dynamic_ncols=True) as bar:
        for start in range(0, len(sentences), window):
            chunk = sentences[start:start + window]
            spans = None if mask_spans is None else mask_spans[start:start + window]
            ids = token_ids(encoder, chunk, spans)
            lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
            pooled = np.empty((len(chunk), encoder.dim), dtype=np.float32)
            tokens: list[np.ndarray | None] = [None] * len(chunk)
            for batch, input_ids, mask in token_batches(ids, pad_id=encoder._pad_id, token_budget=budget,
                                                        max_rows=budget):
                h16, pool = encoder.token_states(input_ids, mask)
                pooled[batch] = pool
                if keep_tokens:
                    for r, j in enumerate(batch):
                        tokens[j] = h16[r, :lengths[j]].copy()
                bar.update(len(batch))
            yield TokenWindow(index=np.arange(start, start + len(chunk)), tokens=tokens if keep_tokens else None,
                              pooled=pooled)


# --- on-disk store ----------------------------------------------------------------------------------

TOKENS, OFFSETS, POOLED, MANIFEST = "tokens.f16.npy", "offsets.npy", "pooled.npy", "manifest.json"


def _content_key(encoder_fp: dict, sentences: Sequence[str], mask_spans: Sequence[Spans] | None,
                 keep_tokens: bool) -> str:
    h = hashlib.sha256()
    # The encoder's identity only (name, dim, id): the id already says the precision when it is not
    # fp32, and other keys (added for display) must not make a store unreachable.
    h.update(json.dumps({k: encoder_fp.get(k) for k in ("name", "dim", "id")}, sort_keys=True).encode())
    h.update(b"tokens" if keep_tokens else b"pooled")
    for i, s in enumerate(sentences):
        h.update(s.encode("utf-8") + b"\x00")
        if mask_spans is not None:
            h.update(repr(list(mask_spans[i])).encode() + b"\x01")
    return h.hexdigest()


class TokenStore:
    """Token states (optional) and pooled vectors of a fixed list of sentences, on disk."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.manifest = load_manifest(self.path / MANIFEST,
                                          advice=f"delete {self.path} to rebuild the token store")
            n = int(self.manifest["sentences"])
            self.pooled = np.load(self.path / POOLED, mmap_mode="r")
            self.has_tokens = bool(self.manifest["keep_tokens"])
            if self.has_tokens:
                self.offsets = np.load(self.path / OFFSETS)
                self.tokens = np.load(self.path / TOKENS, mmap_mode="r")
        except DamagedManifestError:
            raise  # its refusal already names the manifest and the remedy
        except (OSError, ValueError, TypeError, KeyError, ArtefactError) as e:
            raise ArtefactError(f"{self.path}: damaged token store ({e}); delete this folder to rebuild it") from e
        if self.pooled.shape[0] != n or (self.has_tokens and (len(self.offsets) != n + 1
                                                             or self.tokens.shape[0] != int(self.offsets[-1]))):
            raise ArtefactError(f"{self.path}: token store sizes disagree with its manifest; delete it to rebuild")

    def __len__(self) -> int:
        return int(self.manifest["sentences"])

    def token_states(self, i: int) -> np.ndarray:
        """(L_i, D) float16 hidden states of sentence i."""
        return self.tokens[self.offsets[i]:self.offsets[i + 1]]

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


def share_sentence_vectors(encoder, sentences: Sequence[str], store: TokenStore) -> int:
    """Put the store's sentence vectors (pooled, L2-normalised: what `encoder.encode` returns, from
    the same forward pass) into the per-sentence embedding cache, so methods on pooled vectors
    (DREAM, SEED ...) trained or evaluated on the same sentences encode nothing again. Only
    unmasked stores, and only sentences the cache would not truncate. Returns how many."""
    if store.manifest.get("masked") or len(sentences) != len(store):
        raise ValueError("share_sentence_vectors needs the unmasked store of exactly these sentences")
    keep = [i for i, s in enumerate(sentences) if len(s) <= DEFAULT_MAX_CHARS]
    vecs = np.asarray(store.pooled[keep], dtype=np.float32)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    cache = EmbeddingCache(encoder.fingerprint())
    try:
        cache.store([_key(sentences[i]) for i in keep], vecs)
    finally:
        cache.close()
    return len(keep)


def require_token_states(encoder) -> None:
    """EncoderError unless `encoder` gives token-level output (a Hugging Face transformer run by
    xmine's TokenBatchedEncoder, torch or OpenVINO; not use-m3, nor vectors made elsewhere)."""
    if not hasattr(encoder, "tokenizer") or not hasattr(encoder, "token_states"):
        raise EncoderError(f"encoder {encoder.name!r} has no token-level output (it is not a Hugging Face "
                           "transformer run by xmine's TokenBatchedEncoder), which FMDA reads; use me5-small")


def build_token_store(encoder, sentences: Sequence[str], *, mask_spans: Sequence[Spans] | None = None,
                      keep_tokens: bool = True, show_progress: bool = False, desc: str = "token states",
                      root: Path | None = None) -> TokenStore:
    """The store of `sentences` (built once, then reused: keyed by encoder, sentences and masks)."""
    require_token_states(encoder)
    sentences = list(sentences)
    fp = encoder.fingerprint()
    key = _content_key(fp, sentences, mask_spans, keep_tokens)
    path = (root or xmine_home() / "tokens") / f"{key[:24]}"
    if (path / MANIFEST).is_file():
        return TokenStore(path)
    # Token counts first (tokenizing is cheap), so the flat array can be sized before encoding.
    lengths = np.concatenate([np.fromiter((len(x) for x in token_ids(encoder, sentences[s:s + 8192],
                                                                     None if mask_spans is None else mask_spans[s:s + 8192])),
                                          dtype=np.int64)
                              for s in range(0, len(sentences), 8192)]) if sentences else np.zeros(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    with atomic_dir(path) as tmp:
        pooled = np.lib.format.open_memmap(tmp / POOLED, mode="w+", dtype=np.float32, shape=(len(sentences), encoder.dim))
        flat = (np.lib.format.open_memmap(tmp / TOKENS, mode="w+", dtype=np.float16,
                                          shape=(int(offsets[-1]), encoder.dim)) if keep_tokens else None)
        for w in encode_token_states(encoder, sentences, mask_spans=mask_spans, keep_tokens=keep_tokens,
                                     show_progress=show_progress, desc=desc):
            pooled[w.index] = w.pooled
            if keep_tokens:
                for j, t in zip(w.index, w.tokens):
                    if len(t) != lengths[j]:
                        raise EncoderError(f"{encoder.name}: sentence {j} gave {len(t)} tokens, expected {lengths[j]}")
                    flat[offsets[j]:offsets[j + 1]] = t
        pooled.flush()
        del pooled
        if keep_tokens:
            flat.flush()
            del flat
            np.save(tmp / OFFSETS, offsets)
        atomic_write_manifest(tmp / MANIFEST, {"kind": "token-store", "encoder": fp, "sentences": len(sentences),
                                               "tokens": int(offsets[-1]), "keep_tokens": keep_tokens,
                                               "masked": mask_spans is not None, "key": key})
    return TokenStore(path)
