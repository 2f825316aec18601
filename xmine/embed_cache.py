"""A per-sentence cache of raw encoder embeddings, shared by benchmarks and training.

Encoding is the slow part of everything xmine does on a CPU (~150 sentences/s for the default
encoder), while benchmarks and trainers ask for the same sentences again and again (another
projection, another method, another sample of the same corpus). So raw embeddings are kept in one
SQLite file per encoder under `$XMINE_HOME/embeddings/`, keyed by the SHA-1 of the sentence.
Projections are cheap and are applied on top, never cached.

Missing sentences are encoded in chunks and committed after each chunk, so an interrupted run
keeps what it finished. SQLite's WAL mode lets several processes share a cache.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path
from typing import Sequence

import numpy as np

from xmine.paths import xmine_home

# Sentences encoded between two commits: small enough that an interruption loses little,
# large enough that length-sorted batching inside the encoder has material to work with.
CHUNK_SENTENCES = 2048
# SQLite's default limit on host parameters in one statement is 999 (older builds).
_LOOKUP_BATCH = 900


def _key(sentence: str) -> bytes:
    return hashlib.sha1(sentence.encode("utf-8")).digest()


def cache_path(encoder_fingerprint: dict) -> Path:
    """The SQLite file holding `encoder`'s embeddings."""
    ident = json.dumps(encoder_fingerprint.get("id", encoder_fingerprint), sort_keys=True)
    digest = hashlib.sha1(ident.encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", str(encoder_fingerprint.get("name", "encoder")))[-40:]
    return xmine_home() / "embeddings" / f"{name}-{digest}.sqlite"


class EmbeddingCache:
    """Raw embeddings of one encoder, by sentence."""

    def __init__(self, encoder_fingerprint: dict, *, path: str | Path | None = None):
        self.fingerprint = encoder_fingerprint
        self.dim = int(encoder_fingerprint["dim"])
        self.path = Path(path) if path is not None else cache_path(encoder_fingerprint)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=120)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL)")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
        self._db.execute(
            "INSERT OR IGNORE INTO meta VALUES ('encoder', ?)", (json.dumps(encoder_fingerprint, sort_keys=True),)
        )
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM emb").fetchone()[0]

    def lookup(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        for i in range(0, len(keys), _LOOKUP_BATCH):
            part = keys[i : i + _LOOKUP_BATCH]
            rows = self._db.execute(
                f"SELECT key, vec FROM emb WHERE key IN ({','.join('?' * len(part))})", part
            ).fetchall()
            for k, v in rows:
                found[k] = np.frombuffer(v, dtype=np.float32)
        return found

    def store(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self._db.executemany(
            "INSERT OR REPLACE INTO emb (key, vec) VALUES (?, ?)", ((k, v.tobytes()) for k, v in zip(keys, vectors))
        )
        self._db.commit()


def cached_encode(
    encoder,
    sentences: Sequence[str],
    *,
    show_progress: bool = True,
    batch_size: int = 64,
    desc: str = "encoding",
) -> np.ndarray:
    """Embeddings of `sentences` (n, dim) float32, encoding only those not cached yet."""
    n = len(sentences)
    out = np.empty((n, encoder.dim), dtype=np.float32)
    if n == 0:
        return out
    cache = EmbeddingCache(encoder.fingerprint())
    try:
        keys = [_key(s) for s in sentences]
        found = cache.lookup(list(dict.fromkeys(keys)))
        # Unique sentences still to encode, in first-occurrence order.
        todo: dict[bytes, str] = {}
        for k, s in zip(keys, sentences):
            if k not in found and k not in todo:
                todo[k] = s
        if todo:
            from tqdm.auto import tqdm

            todo_keys = list(todo)
            bar = tqdm(total=len(todo_keys), desc=desc, unit="sent", disable=not show_progress,
                       dynamic_ncols=True)
            with bar:
                for i in range(0, len(todo_keys), CHUNK_SENTENCES):
                    chunk = todo_keys[i : i + CHUNK_SENTENCES]
                    vecs = encoder.encode([todo[k] for k in chunk], batch_size=batch_size)
                    cache.store(chunk, vecs)
                    found.update(zip(chunk, vecs))
                    bar.update(len(chunk))
        for i, k in enumerate(keys):
            out[i] = found[k]
    finally:
        cache.close()
    return out
