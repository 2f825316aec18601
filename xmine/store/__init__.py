"""The embedding store: a corpus's embeddings on disk, in `.npy` shards, with its text.

Layout of a finished store directory (names in `layout.py`):

    manifest.json       kind "embedding-store": encoder and projection fingerprints, part, count,
                        dim, dtype, lang, input file (size, sha256, lines), shards (file, rows,
                        bytes, sha256), reading stats, provenance
    emb-00000.npy ...   (rows, dim) float16 (default) or float32, rows in corpus order
    line_numbers.npy    int64, the 1-based input line of every row
    sentences.txt       UTF-8, the text of every row, one per line (see xmine.io.corpus for how
                        tabs and stray line breaks were replaced)
    offsets.npy, hashes.npy, lengths.npy
                        the row index of sentences.txt (xmine.store.text); older stores lack it

- `reader.py`: `EmbeddingStore.open(dir)` validates and reads a finished store, memory-mapped.
- `writer.py`: `embed_corpus` streams a text file through an encoder into a store, resumably;
  `StoreWriter` writes one from embeddings computed elsewhere.
- `shards.py`: one shard encoded and written, the same in one process and in a Ray actor
  (`ShardWriter`, the unit `embed_corpus` hands to its executor).
- `text.py`: the text column read by offset, and the row index (offsets, 64-bit hashes, lengths).
"""

from xmine.store.reader import EmbeddingStore
from xmine.store.array_writer import StoreWriter
from xmine.store.writer import embed_corpus

__all__ = ["EmbeddingStore", "StoreWriter", "embed_corpus"]
