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
# Each row's record id, for inputs read with an id field (xmine.readers): optional.
IDS = "ids.txt"
ID_OFFSETS = "id_offsets.npy"
# Each row's 1-based index among the sentences of its record, for inputs split into sentences
# (--split-sentences, xmine.sentences): optional.
SENTENCE_INDEX = "sentence_index.npy"
LOCK = ".lock"
DTYPES = ("float16", "float32")
PARTS = ("meaning", "language")


def emb_name(i: int) -> str:
    return f"emb-{i:05d}.npy"


def lines_name(i: int) -> str:
    return f"lines-{i:05d}.npy"


def text_name(i: int) -> str:
    return f"text-{i:05d}.txt"


def ids_name(i: int) -> str:
    return f"ids-{i:05d}.txt"


def sent_name(i: int) -> str:
    return f"sent-{i:05d}.npy"
