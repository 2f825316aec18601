"""One shard of an embedding store: encoded (`encode_shard`) and written (`write_shard_record`);
`ShardWriter` does both as the unit `embed_corpus` hands to its executor, in this process or in
a Ray actor, so a shard's files are the same whoever made them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np

from xmine.io.corpus import truncate_for_encoding
from xmine.errors import ArtefactError
from xmine.artefacts.fileio import atomic_path, atomic_write_text, sha256_file
from xmine.artefacts.records import FileRecord, ShardRecord
from xmine.encoders.base import check_finite_output
from xmine.exec.executor import Recipe
from xmine.store.layout import shard_names

#: CPU threads per encoder actor on CPU-only clusters (one actor per `threads` CPUs). One thread per
#: actor keeps every core busy through the tokeniser and the single-threaded parts of a forward
#: pass, where one process with a thread per core leaves cores idle.
ACTOR_THREADS = 1

# Sentences handed to the encoder at once inside a shard: enough for its length-sorted batching,
# few enough that the progress bar moves every few seconds.
_ENCODE_CHUNK = 2048


def encode_shard(
    sentences: list[str], *, encoder: Any, projection: Any, part: str, batch_size: int,
    max_chars: int, on_rows: Any, lines: list[int], last_line: int, lang: str | None = None,
) -> tuple[np.ndarray, list[int]]:
    """Encode one shard in chunks (so the progress bar moves), then apply the projection: the
    embeddings (float32) and the line numbers of the sentences the encoder cut at its token limit.

    Each distinct text of the shard is encoded once and its vector copied to every repeat: web
    corpora repeat lines (boilerplate, navigation), and the encoder is where the time goes."""
    texts = truncate_for_encoding(sentences, max_chars)
    cut = encoder.truncated(texts) if hasattr(encoder, "truncated") else []
    first: dict[str, int] = {}
    inverse = np.fromiter((first.setdefault(t, len(first)) for t in texts), dtype=np.int64, count=len(texts))
    unique = list(first)
    # The progress bar counts input lines (it stands at `last_line`): after each chunk of distinct
    # texts it moves to the last row of the prefix of rows whose texts are all encoded by then.
    needs = np.maximum.accumulate(inverse)  # rows 0..r need the distinct texts 0..needs[r]
    shown = last_line
    pieces = []
    for lo in range(0, len(unique), _ENCODE_CHUNK):
        chunk = unique[lo: lo + _ENCODE_CHUNK]
        raw = np.asarray(encoder.encode(chunk, batch_size=batch_size), dtype=np.float32)
        if raw.ndim != 2 or raw.shape[0] != len(chunk):
            raise ArtefactError(f"encoder returned shape {raw.shape} for {len(chunk)} sentences")
        check_finite_output(raw, encoder, lambda i: f"line {lines[int(np.argmax(inverse == lo + i))]}")
        pieces.append(projection.transform(raw, part, lang=lang) if projection is not None else raw)
        if on_rows is not None:
            done = int(np.searchsorted(needs, lo + len(chunk)))  # rows whose texts are all encoded
            on_rows(lines[done - 1] - shown)
            shown = lines[done - 1]
    return np.concatenate(pieces, axis=0).astype(np.float32, copy=False)[inverse], [lines[i] for i in cut]


def write_shard_record(out_dir: Path, idx: int, emb: np.ndarray, line_numbers, sentences: Sequence[str],
                       ids: Sequence[str] | None = None, positions: Sequence[int] | None = None) -> ShardRecord:
    """Write shard `idx` (embeddings in their final dtype, line numbers, text, record ids and
    sentence indices when given) atomically; its record."""
    if len(emb) != len(sentences) or len(line_numbers) != len(sentences):
        raise ArtefactError(f"shard {idx}: {len(emb)} embeddings, {len(line_numbers)} line numbers, "
                            f"{len(sentences)} sentences")
    name = shard_names(idx)
    with atomic_path(out_dir / name["emb"]) as tmp:
        np.save(tmp, emb)
    with atomic_path(out_dir / name["lines"]) as tmp:
        np.save(tmp, np.asarray(line_numbers, dtype=np.int64))
    atomic_write_text(out_dir / name["text"], "".join(s + "\n" for s in sentences))
    emb_path = out_dir / name["emb"]
    if ids is not None:
        if len(ids) != len(sentences):
            raise ArtefactError(f"shard {idx}: {len(ids)} record ids for {len(sentences)} sentences")
        atomic_write_text(out_dir / name["ids"], "".join(f"{i}\n" for i in ids))
    if positions is not None:
        if len(positions) != len(sentences):
            raise ArtefactError(f"shard {idx}: {len(positions)} sentence indices for {len(sentences)} sentences")
        with atomic_path(out_dir / name["sent"]) as tmp:
            np.save(tmp, np.asarray(positions, dtype=np.int32))
    companions = [name["lines"], name["text"], *([name["ids"]] if ids is not None else []),
                  *([name["sent"]] if positions is not None else [])]
    return ShardRecord(file=name["emb"], rows=len(sentences), bytes=emb_path.stat().st_size,
                       sha256=sha256_file(emb_path), lines_file=name["lines"], text_file=name["text"],
                       dim=int(emb.shape[1]), ids_file=name["ids"] if ids is not None else None,
                       sent_file=name["sent"] if positions is not None else None,
                       companions={n: FileRecord(bytes=(out_dir / n).stat().st_size, sha256=sha256_file(out_dir / n))
                                   for n in companions})


class EncodedShard(NamedTuple):
    """What a `ShardWriter` unit gives back."""

    index: int  #: the shard's index
    record: ShardRecord  #: its files, as written
    token_cut_lines: list[int]  #: lines the encoder cut at its token limit
    max_tokens: int | None  #: that limit


class ShardWriter:
    """The unit of `embed`: a shard's sentences encoded (and projected) and written into `out_dir`.

    Built once per worker (the encoder is loaded once) wherever the executor runs it: the encoder
    and the projection come from their recipes (`xmine.exec.executor.Recipe`: in the driver's
    process its own; on a cluster's actor, loaded there, the encoder checked by fingerprint)."""

    def __init__(self, *, encoder: Recipe, projection: Recipe | None, out_dir: str | Path, part: str, dtype: str,
                 batch_size: int, max_chars: int, lang: str | None):
        self.encoder, self.out_dir = encoder.get(), Path(out_dir)
        self.projection = projection.get() if projection is not None else None
        self.part, self.dtype, self.batch_size, self.max_chars, self.lang = part, dtype, batch_size, max_chars, lang

    def __call__(self, idx: int, sentences: list[str], lines: list[int], ids: list | None, positions: list | None,
                 last_line: int, on_rows=None) -> EncodedShard:
        if hasattr(self.encoder, "vectors"):  # ExternalEmbeddings: the rows of these lines, read from its file
            emb, cut = self.encoder.vectors(idx, lines), []
            if self.projection is not None:
                emb = self.projection.transform(emb, self.part, lang=self.lang)
        else:
            emb, cut = encode_shard(sentences, encoder=self.encoder, projection=self.projection, part=self.part,
                                    batch_size=self.batch_size, max_chars=self.max_chars, on_rows=on_rows,
                                    lines=lines, last_line=last_line, lang=self.lang)
        record = write_shard_record(self.out_dir, idx, emb.astype(self.dtype, copy=False), lines, sentences, ids=ids,
                                    positions=positions)
        return EncodedShard(idx, record, cut, getattr(self.encoder, "max_tokens", None))

