"""A per-sentence cache of raw encoder embeddings, shared by benchmarks and training.

Encoding is the slow part of everything xmine does on a CPU (benchmarks/RESULTS.md, "Encoding
speed"), while benchmarks and trainers ask for the same sentences again and again (another
projection, another method, another sample of the same corpus). So raw embeddings are kept in one
SQLite file per encoder under `$XMINE_HOME/embeddings/`, keyed by the SHA-1 of the sentence.
Projections are cheap and are applied on top, never cached.

Missing sentences are encoded in chunks and committed after each chunk, so an interrupted run
keeps what it finished. SQLite's WAL mode lets several processes share a cache.

Bound: each cache file holds at most `XMINE_CACHE_MAX_MB` megabytes of vectors (default
`DEFAULT_MAX_MB` = 4096, about 2.6 million 384-d sentences); past it the least recently used
sentences are evicted. Corpus-scale commands (embed, mine, build-index, search) never use the
cache: they stream through `xmine.store.embed_corpus`. `xmine cache info` and `xmine cache clear`
show and empty it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sqlite3
import zlib
from pathlib import Path
from typing import Sequence

import numpy as np

from xmine.errors import ArtefactError, ConfigError
from xmine.paths import xmine_home
from xmine.artefacts.records import EncoderFingerprint
from xmine.encoders.base import check_finite_output

# Sentences encoded between two commits: small enough that an interruption loses little,
# large enough that length-sorted batching inside the encoder has material to work with.
CHUNK_SENTENCES = 2048
# SQLite's default limit on host parameters in one statement is 999 (older builds).
_LOOKUP_BATCH = 900
#: default bound of one cache file, megabytes of vectors (XMINE_CACHE_MAX_MB overrides)
DEFAULT_MAX_MB = 4096
# Bytes a row costs beyond its vector: the 20-byte key, the timestamp, SQLite's row overhead.
_ROW_OVERHEAD = 48
#: Each stored vector is followed by the CRC-32 of its bytes (4 bytes, little-endian): a vector
#: damaged on disk is encoded again, not read (SQLite's own checks do not look inside a value).
#: Rows written before carry none and are read as they are.
_CRC = 4


def max_cache_mb() -> float:
    """The bound from $XMINE_CACHE_MAX_MB (megabytes), else DEFAULT_MAX_MB."""
    raw = os.environ.get("XMINE_CACHE_MAX_MB")
    if raw is None or raw == "":
        return float(DEFAULT_MAX_MB)
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"XMINE_CACHE_MAX_MB={raw!r}: expected a number of megabytes") from None
    if value <= 0:
        raise ConfigError(f"XMINE_CACHE_MAX_MB={raw!r}: must be > 0")
    return value


def _key(sentence: str) -> bytes:
    return hashlib.sha1(sentence.encode("utf-8")).digest()


def cache_path(encoder_fingerprint: dict) -> Path:
    """The SQLite file holding `encoder`'s embeddings."""
    fp = EncoderFingerprint.from_dict(encoder_fingerprint, where="the encoder's fingerprint")
    return xmine_home() / "embeddings" / _file_name(fp.name, str(fp.id))


def _file_name(encoder_name: str, encoder_id: str) -> str:
    digest = hashlib.sha1(json.dumps(encoder_id).encode()).hexdigest()[:16]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", encoder_name)[-40:] + f"-{digest}.sqlite"


def _one_line_errors(method):
    """SQLite's errors as one line naming the cache file: a damaged file ("database disk image is
    malformed", "file is not a database") fails on open or on any later query, a full disk or a
    lock held past the timeout on a write. `xmine cache clear` leaves a file it cannot read alone
    (it cannot prove it is xmine's), so the line says how to remove it."""

    @functools.wraps(method)
    def wrapped(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as e:
            raise ArtefactError(f"{self.path}: the embedding cache of {self.name} cannot be used ({e}); if it is "
                                "damaged, delete it with its -wal and -shm files: it is rebuilt when next needed") from None

    return wrapped


class EmbeddingCache:
    """Raw embeddings of one encoder, by sentence."""

    @_one_line_errors
    def __init__(self, encoder_fingerprint: dict, *, path: str | Path | None = None, max_mb: float | None = None):
        self.fingerprint = encoder_fingerprint
        fp = EncoderFingerprint.from_dict(encoder_fingerprint, where="the encoder's fingerprint")
        self.name, self.dim = fp.name, fp.dim
        self.path = Path(path) if path is not None else cache_path(encoder_fingerprint)
        self.max_rows = max(1, int((max_mb if max_mb is not None else max_cache_mb()) * 2**20
                                   // (4 * self.dim + _CRC + _ROW_OVERHEAD)))
        _check_cache_dir(self.path.parent)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=120)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL, "
                         "used REAL NOT NULL DEFAULT 0)")
        try:  # caches written before the LRU bound have no `used` column
            self._db.execute("ALTER TABLE emb ADD COLUMN used REAL NOT NULL DEFAULT 0")
        except sqlite3.OperationalError:
            pass  # already there
        self._db.execute("CREATE INDEX IF NOT EXISTS emb_used ON emb (used)")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
        self._db.execute(
            "INSERT OR IGNORE INTO meta VALUES ('encoder', ?)", (json.dumps(encoder_fingerprint, sort_keys=True),)
        )
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    @_one_line_errors
    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM emb").fetchone()[0]

    @_one_line_errors
    def lookup(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        for i in range(0, len(keys), _LOOKUP_BATCH):
            part = keys[i : i + _LOOKUP_BATCH]
            rows = self._db.execute(
                f"SELECT key, vec FROM emb WHERE key IN ({','.join('?' * len(part))})", part
            ).fetchall()
            for k, v in rows:  # a row of another length, or whose CRC differs, is damaged: encoded again, replaced
                if len(v) == 4 * self.dim + _CRC and zlib.crc32(v[:-_CRC]) == int.from_bytes(v[-_CRC:], "little"):
                    found[k] = np.frombuffer(v[:-_CRC], dtype=np.float32)
                elif len(v) == 4 * self.dim:  # (written before rows carried their CRC)
                    found[k] = np.frombuffer(v, dtype=np.float32)
        if found:  # recently used: evicted last
            now = self._tick()
            self._db.executemany("UPDATE emb SET used = ? WHERE key = ?", ((now, k) for k in found))
            self._db.commit()
        return found

    @_one_line_errors
    def store(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        now = self._tick()
        self._db.executemany(
            "INSERT OR REPLACE INTO emb (key, vec, used) VALUES (?, ?, ?)",
            ((k, _with_crc(v.tobytes()), now) for k, v in zip(keys, vectors)),
        )
        self._db.commit()
        self.evict()

    def _tick(self) -> float:
        """The next use stamp: one more than the newest in the cache, so the order of uses is the
        order of calls (in any process sharing the cache) however close in time they come. (Caches
        written with wall-clock stamps go on from their newest.)"""
        return self._db.execute("SELECT COALESCE(MAX(used), 0) + 1 FROM emb").fetchone()[0]

    @_one_line_errors
    def evict(self) -> None:
        """Delete the least recently used rows beyond `max_rows`."""
        excess = len(self) - self.max_rows
        if excess > 0:
            self._db.execute("DELETE FROM emb WHERE key IN (SELECT key FROM emb ORDER BY used ASC LIMIT ?)", (excess,))
            self._db.commit()


def _with_crc(vector: bytes) -> bytes:
    """A vector's bytes as a row stores them: followed by their CRC-32 (`_CRC`)."""
    return vector + zlib.crc32(vector).to_bytes(_CRC, "little")


def cache_files() -> list[Path]:
    """The `*.sqlite` files under $XMINE_HOME/embeddings: xmine's cache files, and whatever else a
    user put there (`cache_file_info` tells them apart). ArtefactError where that is no folder
    (was: "0 cache files", and encoding then failed with "file exists")."""
    d = xmine_home(create=False) / "embeddings"
    _check_cache_dir(d)
    return sorted(d.glob("*.sqlite")) if d.is_dir() else []


def _check_cache_dir(d: Path) -> None:
    if os.path.lexists(d) and not d.is_dir():
        raise ArtefactError(f"{d}: the embedding cache's folder ($XMINE_HOME/embeddings) is not a directory; move it "
                            "away (or set XMINE_HOME elsewhere)")


#: how `_file_name` names a cache file
_CACHE_NAME = re.compile(r"[A-Za-z0-9._-]{1,40}-[0-9a-f]{16}\.sqlite")
#: a SQLite database's own companion files, removed with it
_SQLITE_PARTS = ("", "-wal", "-shm", "-journal")


def cache_file_info(path: Path, *, check: bool = False) -> tuple[dict | None, str | None]:
    """(encoder name, dim, rows and bytes on disk, None) of one cache file, read-only; or (None,
    why not) for a file that is not provably xmine's: a cache file records its encoder in its
    `meta` table, and that encoder gives exactly the file's name (`cache_path`). Anything else
    (another SQLite file, one with a table `emb` of its own) is a user's and is never touched.
    `check`: also SQLite's `quick_check` of every page (reads the whole file), its first finding
    as "damaged" (None: none)."""
    if not _CACHE_NAME.fullmatch(path.name):
        return None, "not an xmine cache file: not named ENCODER-HASH.sqlite"
    # Opening a database in WAL mode adds -wal and -shm files beside it, even read-only; so one
    # without them is read as an immutable file (there is no WAL content to miss).
    immutable = "" if path.with_name(path.name + "-wal").exists() else "&immutable=1"
    try:
        db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro{immutable}", uri=True, timeout=120)
        try:
            meta = db.execute("SELECT v FROM meta WHERE k = 'encoder'").fetchone()
            rows = db.execute("SELECT COUNT(*) FROM emb").fetchone()[0]
            try:  # (a page damaged inside a table still counts its rows: was listed as a sound cache)
                found = db.execute("PRAGMA quick_check(1)").fetchone()[0] if check else "ok"
            except sqlite3.DatabaseError as e:
                found = str(e)
        finally:
            db.close()
    except sqlite3.DatabaseError as e:  # not a database, no such table, ...
        if "malformed" in str(e):  # a damaged database, named as a cache: what it records cannot be read
            return None, (f"named as an xmine cache file, but damaged ({e}), so not provably one; delete it "
                          "yourself if it is")
        return None, f"not an xmine cache file: {e}"
    try:
        encoder = json.loads(meta[0]) if meta else None
    except (TypeError, ValueError):
        encoder = None
    if not (isinstance(encoder, dict) and isinstance(encoder.get("name"), str) and isinstance(encoder.get("id"), str)):
        return None, "not an xmine cache file: no encoder recorded in it"
    if _file_name(encoder["name"], encoder["id"]) != path.name:  # (a copy renamed, or another build of it)
        return None, (f"not an xmine cache file: renamed; the cache of the encoder recorded in it ({encoder['name']}) "
                      f"is named {_file_name(encoder['name'], encoder['id'])}")
    size = sum(part.stat().st_size for part in _parts(path) if part.is_file())
    return {"path": str(path), "encoder": encoder["name"], "dim": encoder.get("dim"), "rows": rows,
            "bytes": size, "damaged": None if found == "ok" else found}, None


def _parts(path: Path) -> list[Path]:
    return [path.with_name(path.name + suffix) for suffix in _SQLITE_PARTS]


def remove_cache_file(path: Path) -> None:
    """Delete one cache file (one `cache_file_info` found to be xmine's) and its -wal/-shm files."""
    for part in _parts(path):
        part.unlink(missing_ok=True)


def cached_encode(encoder, sentences: Sequence[str], *, show_progress: bool = True, batch_size: int = 64,
                  desc: str = "encoding") -> np.ndarray:
    """Embeddings of `sentences` (n, dim) float32, encoding only those not cached yet."""
    n = len(sentences)
    out = np.empty((n, encoder.dim), dtype=np.float32)
    if n == 0:
        return out
    cache = EmbeddingCache(encoder.fingerprint())
    try:
        keys = [_key(s) for s in sentences]
        found = cache.lookup(list(dict.fromkeys(keys)))
        # Unique sentences still to encode, in first-occurrence order (a key is its sentence's hash).
        todo = {k: s for k, s in zip(keys, sentences) if k not in found}
        if todo:
            from tqdm.auto import tqdm

            todo_keys = list(todo)
            with tqdm(total=len(todo_keys), desc=desc, unit="sent", disable=not show_progress,
                      dynamic_ncols=True) as bar:
                for i in range(0, len(todo_keys), CHUNK_SENTENCES):
                    chunk = todo_keys[i : i + CHUNK_SENTENCES]
                    vecs = encoder.encode([todo[k] for k in chunk], batch_size=batch_size)
                    check_finite_output(np.asarray(vecs), encoder, lambda j: f"sentence {todo[chunk[j]][:60]!r}")
                    cache.store(chunk, vecs)
                    found.update(zip(chunk, vecs))
                    bar.update(len(chunk))
        for i, k in enumerate(keys):
            out[i] = found[k]
    finally:
        cache.close()
    return out
