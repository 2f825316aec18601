"""File names and format constants of an embedding store directory (shared by reader and writer)."""

from __future__ import annotations

STORE_KIND = "embedding-store"
FORMAT_VERSION = 2
PROGRESS = "progress.json"
SENTENCES = "sentences.txt"
LINE_NUMBERS = "line_numbers.npy"
# The row index of sentences.txt (xmine.store.text).
OFFSETS = "offsets.npy"
HASHES = "hashes.npy"
LENGTHS = "lengths.npy"
# Each row's record id, for inputs read with an id field (xmine.io.readers): optional.
IDS = "ids.txt"
ID_OFFSETS = "id_offsets.npy"
# Each row's 1-based index among the sentences of its record, for inputs split into sentences
# (--split-sentences, xmine.io.sentences): optional.
SENTENCE_INDEX = "sentence_index.npy"
#: The files beside the shards that the manifest records: always, and only for some inputs.
JOINED_FILES = (SENTENCES, LINE_NUMBERS, OFFSETS, HASHES, LENGTHS)
OPTIONAL_FILES = (IDS, ID_OFFSETS, SENTENCE_INDEX)
LOCK = ".lock"
DTYPES = ("float16", "float32")
#: What a store keeps its rows in unless told: `xmine mine` encodes a text side into such a store, so
#: a benchmark that scores what `mine` keeps rounds its rows to it too (`xmine.benchmarks.bucc`).
DEFAULT_DTYPE = "float16"
PARTS = ("meaning", "language")


def shard_names(i: int) -> dict[str, str]:
    """The files of shard i by what they hold: embeddings, line numbers, text, record ids, sentence indices."""
    return {k: f"{k}-{i:05d}.{ext}" for k, ext in (("emb", "npy"), ("lines", "npy"), ("text", "txt"),
                                                     ("ids", "txt"), ("sent", "npy"))}
