"""Writing an embedding store (see xmine.store for the layout): `embed_corpus`.

How `embed_corpus` builds it: the corpus is streamed and encoded shard by shard (`shard_rows`
sentences), so memory stays bounded whatever the corpus size. Each finished shard (embeddings,
line numbers and text) is written atomically and then recorded in `progress.json`; a run killed or
interrupted midway is resumed by running it again: shards already recorded are checked (size,
sha256) and kept, the input is streamed past them, and only the rest is encoded. A run is only
resumed if the input file (size + sha256), the encoder, the projection, the part, the dtype, the
language and `max_chars` are the same; otherwise it is refused unless `overwrite=True`. A
finished store is not rebuilt: `embed_corpus` checks the same things and returns it. At the end
the per-shard line numbers and texts are joined into `line_numbers.npy` and `sentences.txt`, the
manifest is written, and `progress.json` is removed.

Without a projection the raw encoder embeddings are stored and the manifest's part is "raw"; with
one, `projection.transform(raw, part)` ("meaning" or "language") is stored.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from xmine.artefacts import provenance
from xmine.fileio import (
    MANIFEST,
    atomic_path,
    atomic_write_json,
    swap_in_dir,
    read_manifest,
    sha256_file,
    write_manifest,
)
from xmine.corpus import DEFAULT_MAX_CHARS, CorpusStats
from xmine.errors import ArtefactError, ConfigError, OutputError
from xmine.output_state import MARKER, dir_kind
from xmine.outputs import claim_output
from xmine.projection import resolve_projection
from xmine.store.layout import (
    DTYPES, FORMAT_VERSION, HASHES, ID_OFFSETS, IDS, LENGTHS, LINE_NUMBERS, LOCK, OFFSETS, PARTS, PROGRESS,
    SENTENCE_INDEX, SENTENCES, STORE_KIND,
)
from xmine.store.text import RowIndex
from xmine.store.reader import EmbeddingStore
from xmine.store.shards import encode_shard, write_shard

log = logging.getLogger("xmine.store")

# The language code of a corpus whose language was not given (ISO 639-2 "undetermined"): recorded
# as such, and a language-dependent projection picks each row's nearest language itself.
UNDETERMINED = "und"


@dataclass(kw_only=True)
class BuildInfo:
    """What one `embed_corpus` call did (for the CLI's summary line and for tests)."""

    #: the store was already finished; nothing was encoded
    already_done: bool = False
    #: sentences found in finished shards of an earlier, interrupted run
    resumed_rows: int = 0
    #: sentences encoded by this call
    encoded: int = 0
    #: wall-clock seconds of this call
    seconds: float = 0.0


@contextlib.contextmanager
def _locked(out_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on the store directory, so two runs cannot write it at once."""
    with open(out_dir / LOCK, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ArtefactError(f"{out_dir}: another xmine process is writing this embedding store") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _identity_mismatch(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Why a store (or interrupted run) with identity `old` cannot serve request `new`, or None."""
    if (old["input"]["size"], old["input"]["sha256"]) != (new["input"]["size"], new["input"]["sha256"]):
        return (
            f"it was made from another input file ({old['input']['path']}, {old['input']['size']} bytes, "
            f"sha256 {old['input']['sha256'][:12]}...) than {new['input']['path']} "
            f"({new['input']['size']} bytes, sha256 {new['input']['sha256'][:12]}...)"
        )
    # how the input was read (xmine.readers) and split into sentences (xmine.sentences)
    for key in ("format", "text_field", "id_field", "split", "split_sentences"):
        if old["input"].get(key) != new["input"].get(key):
            if key == "split_sentences":
                return f"it was made {_split_words(old['input'])}, not {_split_words(new['input'])}"
            return f"its input was read with {key}={old['input'].get(key)!r}, not {new['input'].get(key)!r}"
    if old["encoder"].get("id") != new["encoder"].get("id"):
        from xmine.encoders import fingerprint_precision, weights_id

        if weights_id(old["encoder"]) == weights_id(new["encoder"]):
            p_old, p_new = fingerprint_precision(old["encoder"]), fingerprint_precision(new["encoder"])
            return f"it was made at encoder precision {p_old} (--precision {p_old}), not {p_new}"
        return f"it was made with encoder {old['encoder'].get('name')!r}, not {new['encoder'].get('name')!r}"
    old_p = (old.get("projection") or {}).get("id")
    new_p = (new.get("projection") or {}).get("id")
    if old_p != new_p:
        return f"it was made with projection {old.get('projection')}, not {new.get('projection')}"
    from xmine.langs import normalize_lang

    if normalize_lang(old.get("lang") or "") != normalize_lang(new.get("lang") or ""):  # de = deu = deu_Latn
        return f"it was made with lang={old.get('lang')!r}, not {new.get('lang')!r}"
    for key in ("part", "dtype", "max_chars"):
        if old.get(key) != new.get(key):
            return f"it was made with {key}={old.get(key)!r}, not {new.get(key)!r}"
    return None


def _split_words(identity: dict[str, Any]) -> str:
    """"with --split-sentences (sentencex 1.0.32, eng)" or "without --split-sentences"."""
    how = identity.get("split_sentences")
    if not how:
        return "without --split-sentences"
    return f"with --split-sentences ({how.get('library')} {how.get('version')}, {how.get('lang')})"


_STORE_FILE = re.compile(r"^(emb-\d{5}\.npy|lines-\d{5}\.npy|text-\d{5}\.txt|ids-\d{5}\.txt|sent-\d{5}\.npy|"
                         + "|".join(re.escape(n) for n in (MANIFEST, PROGRESS, SENTENCES, LINE_NUMBERS, OFFSETS, HASHES,
                                                                LENGTHS, IDS, ID_OFFSETS, SENTENCE_INDEX, LOCK, MARKER))
                         + r"|\..*\.tmp.*)$")


def _looks_like_store(directory: Path) -> bool:
    """An embedding store from before the output marker: only store file names, and shards."""
    names = [e.name for e in directory.iterdir()]
    return any(n.startswith("emb-") for n in names) and all(_STORE_FILE.match(n) for n in names)


# The names the writer itself makes, exactly: per-shard files, the joined files, and the hidden
# temporaries of its atomic writes (`atomic_path`: ".STEM.<8 random>.tmp.SUFFIX").
_SHARD_FILE = re.compile(r"^(emb-\d{5}\.npy|lines-\d{5}\.npy|text-\d{5}\.txt|ids-\d{5}\.txt|sent-\d{5}\.npy)$")
_OWN_TEMPORARY = re.compile(r"^\.(emb-\d{5}|lines-\d{5}|text-\d{5}|ids-\d{5}|sent-\d{5}|manifest|progress|sentences|"
                            r"line_numbers|offsets|hashes|lengths|ids|id_offsets|sentence_index|\.xmine-output)"
                            r"\.[a-z0-9_]{8}\.tmp\.(npy|txt|json)$")
_OWN_NAMES = frozenset({MANIFEST, PROGRESS, SENTENCES, LINE_NUMBERS, OFFSETS, HASHES, LENGTHS, IDS, ID_OFFSETS,
                        SENTENCE_INDEX, LOCK, MARKER})


def _own_file(name: str) -> bool:
    return name in _OWN_NAMES or bool(_SHARD_FILE.match(name) or _OWN_TEMPORARY.match(name))


def _refuse_foreign(out_dir: Path) -> None:
    """OutputError when the store directory holds anything the writer did not make (a user's
    notes, an analysis folder): rebuilding it in place or replacing it would delete them."""
    foreign = sorted(e.name for e in out_dir.iterdir() if not (_own_file(e.name) and e.is_file()))
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise OutputError(f"{out_dir}: holds files that are not part of the embedding store ({shown}); "
                          "refusing to rebuild it (move them away first or choose another output directory)")


def _clear_dir(out_dir: Path) -> None:
    """Remove the writer's own files from a store directory (one the claim recognised as an
    embedding store); refused, with nothing removed, when it holds anything else."""
    _refuse_foreign(out_dir)
    for entry in out_dir.iterdir():
        if entry.name not in (LOCK, MARKER):
            entry.unlink()


def _rebuild_dir(target: Path) -> Path:
    """The hidden directory beside a finished store where its replacement is built (and an
    interrupted replacement resumed): `.NAME.xmine-rebuild`, marked as an embedding store's."""
    d = target.parent / f".{target.name}.xmine-rebuild"
    if os.path.lexists(d):
        if d.is_symlink() or not d.is_dir() or dir_kind(d)[0] != STORE_KIND:
            raise OutputError(f"{d}: exists and is not xmine's (the rebuild of {target} is made there); "
                              "move it away first")
        return d
    d.mkdir()
    atomic_write_json(d / MARKER, {"kind": STORE_KIND})
    return d


def _finished_shards(out_dir: Path, progress: dict[str, Any]) -> list[dict[str, Any]]:
    """The shards of an interrupted run that are intact on disk (a prefix of the recorded ones)."""
    kept = []
    for shard in progress.get("shards", []):
        ok = all((out_dir / shard[k]).is_file() for k in ("file", "lines_file", "text_file", "ids_file", "sent_file")
                 if k in shard)
        ok = ok and (out_dir / shard["file"]).stat().st_size == shard["bytes"]
        ok = ok and sha256_file(out_dir / shard["file"]) == shard["sha256"]
        if not ok:
            log.warning(f"{out_dir / shard['file']}: damaged or missing; re-encoding from there")
            break
        kept.append(shard)
    return kept


def embed_corpus(
    input_path: str | Path,
    out_dir: str | Path,
    *,
    encoder: Any,
    lang: str,
    projection: Any = None,
    part: str = "meaning",
    dtype: str = "float16",
    shard_rows: int = 50_000,
    batch_size: int = 64,
    max_chars: int = DEFAULT_MAX_CHARS,
    overwrite: bool = False,
    show_progress: bool = True,
    on_shard_done: Callable[[int, int], None] | None = None,
    ray: str | None = None,
    input_format: Any = None,
) -> EmbeddingStore:
    """Embed a corpus (a text file, one sentence a line, or any format of `xmine.readers`) into an
    embedding store at `out_dir`.

    - `encoder`: an `xmine.encoders.Encoder`.
    - `lang`: the corpus language code, recorded for downstream steps.
    - `projection`: None (store raw embeddings), a Projection, or a projection directory.
    - `part`: which part of the projection to store, "meaning" or "language".
    - `dtype`: "float16" (half the disk, ~1e-3 error on unit vectors) or "float32".
    - `shard_rows`: sentences per shard, which is also the unit of resuming.
    - `batch_size`: the encoder's batch size.
    - `max_chars`: sentences are cut to this many characters for encoding (text kept whole).
    - `overwrite`: rebuild an existing store (or discard an interrupted run) instead of refusing
      when it was made from other inputs or settings.
    - `on_shard_done(shard_index, rows_done)`: called after each shard is safely on disk.

    `ray`: None encodes in this process; "auto" or a Ray cluster address encodes the shards in an
    actor pool on that cluster (`xmine.store.ray_writer`), writing the same store.

    `input_format`: an `xmine.readers.InputFormat` (format, text field, id field); None reads by
    extension. Every record of a non-text input is checked before anything is written; a row's
    record number is stored as its line number, and its id (with an id field) in `ids.txt`. With
    `split_sentences` each record is split by `lang`'s splitter (xmine.sentences; a ConfigError
    before anything is written when `lang` is undetermined): a row per sentence, its 1-based index
    in the record in `sentence_index.npy`, the splitter in the input identity.

    Returns the opened store; its `build_info` says what this call did. See the module doc for
    the resume rules.
    """
    input_path, out_dir = Path(input_path), Path(out_dir)
    t0 = time.perf_counter()
    if dtype not in DTYPES:
        raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if part not in PARTS:
        raise ConfigError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    if shard_rows < 1 or batch_size < 1 or max_chars < 1:
        raise ConfigError("shard_rows, batch_size and max_chars must be >= 1")
    if ray is not None:  # join the cluster first: a wrong address fails before any work
        from xmine.cluster import connect

        connect(ray)
    projection = resolve_projection(projection)
    enc_fp = encoder.fingerprint()
    if projection is not None:
        projection.check_encoder(enc_fp)
        stored_part = part
    elif part == "language":
        raise ConfigError("part 'language' needs a projection (raw embeddings have no language part)")
    else:
        stored_part = "raw"

    # Validates the input (missing, directory, empty; every record of a structured format) before
    # anything is created on disk.
    from xmine.readers import open_corpus

    splitter = None
    if input_format is not None and input_format.split_sentences:
        from xmine.sentences import sentence_splitter

        # Before the input is read: a missing language or splitter library fails at once.
        splitter = sentence_splitter(None if lang == UNDETERMINED else lang, what=str(input_path))
    reader = open_corpus(input_path, input_format)
    if ray is not None and (reader.format != "text" or splitter is not None):
        raise ConfigError(f"--ray encodes text files one sentence a line; {input_path} is read as {reader.format}"
                          f"{' and split into sentences' if splitter is not None else ''}: embed it without --ray")
    n_lines = reader.count
    identity = {
        "input": {**reader.identity(), **({"split_sentences": splitter.describe()} if splitter else {})},
        "encoder": enc_fp,
        "projection": projection.fingerprint() if projection is not None else None,
        "part": stored_part,
        "dtype": dtype,
        "lang": lang,
        "max_chars": max_chars,
    }

    # Refuses an input as output, a foreign or other-kind directory, and a second writer.
    with claim_output(out_dir, kind=STORE_KIND, form="dir", in_place=True, reopen=True, overwrite=overwrite,
                      inputs=[input_path, getattr(projection, "path", None)], legacy=_looks_like_store), \
            _locked(out_dir):
        info = BuildInfo()
        target = out_dir  # where the finished store ends up; out_dir is where it is built
        has_manifest = (out_dir / MANIFEST).is_file()
        has_progress = (out_dir / PROGRESS).is_file()
        if not has_manifest and not has_progress and any(
                e.name not in (LOCK, MARKER) and not e.name.startswith(".") for e in out_dir.iterdir()):
            # Ours (marker or store file names) but neither finished nor resumable.
            if not overwrite:
                raise ArtefactError(f"{out_dir}: unfinished or damaged embedding store (no {MANIFEST}, no "
                                    f"{PROGRESS}); pass --overwrite to rebuild it")
            _clear_dir(out_dir)
        if has_manifest:
            manifest = read_manifest(out_dir, STORE_KIND)  # refuses a directory of another kind
            why = _identity_mismatch(manifest, identity)
            if why is None:
                _remove_leftovers(out_dir, manifest)
                try:
                    store = EmbeddingStore.open(out_dir)
                    store.verify()  # "already finished" is a promise about the content too
                except ArtefactError as e:
                    if not overwrite:
                        raise ArtefactError(f"{e}; pass --overwrite to rebuild the store") from None
                    why = str(e)
                else:
                    info.already_done = True
                    info.seconds = time.perf_counter() - t0
                    store.build_info = info
                    return store
            if not overwrite:
                raise ArtefactError(f"{out_dir}: an embedding store already, but {why}; "
                                    "pass --overwrite to rebuild it or choose another output directory")
            # Built beside the finished store and swapped in at the end: until then the old store
            # stays whole and usable, whatever interrupts the rebuild.
            _refuse_foreign(out_dir)
            out_dir = _rebuild_dir(target)
            has_progress = (out_dir / PROGRESS).is_file()
        shards: list[dict[str, Any]] = []
        more: list[dict[str, Any]] = []  # finished after a gap, by a run on Ray
        if has_progress:
            progress = json.loads((out_dir / PROGRESS).read_text(encoding="utf-8"))
            why = _identity_mismatch(progress["identity"], identity)
            if why is not None and not progress.get("shards"):
                why = None  # nothing finished yet (e.g. the input had a bad line): start afresh
                progress["shards"] = []
            if why is not None and not overwrite:
                raise ArtefactError(f"{out_dir}: holds an interrupted run, but {why}; "
                                    "pass --overwrite to discard it or choose another output directory")
            if why is not None:
                _clear_dir(out_dir)
            else:
                shards = _finished_shards(out_dir, progress)
                # Only a run on Ray reads these (the single-process run re-encodes after the prefix).
                intact_prefix = len(shards) == len(progress.get("shards", []))
                more = progress.get("more_shards", []) if ray is not None and intact_prefix else []
        _remove_temporaries(out_dir)
        info.resumed_rows = sum(s["rows"] for s in shards)
        if info.resumed_rows:
            log.info(f"{out_dir}: resuming after {len(shards)} finished shard(s), {info.resumed_rows} sentences")

        def save_progress() -> None:
            atomic_write_json(out_dir / PROGRESS, {"identity": identity, "shards": shards, "more_shards": more})

        save_progress()
        stats = CorpusStats(path=input_path)

        def _embed_here() -> None:
            """The single-process loop: stream the corpus past the finished shards and encode
            the rest shard by shard, recording each in the progress file as it is written."""
            pbar = None
            if show_progress:
                from tqdm import tqdm

                pbar = tqdm(total=n_lines, unit=" lines", desc=f"embed {input_path.name}", dynamic_ncols=True)
            try:
                buf_text: list[str] = []
                buf_lines: list[int] = []
                buf_ids: list | None = [] if reader.has_ids else None
                buf_pos: list | None = [] if splitter is not None else None
                skip = info.resumed_rows
                last_line = 0

                def flush() -> None:
                    nonlocal last_line
                    idx = len(shards)
                    emb = encode_shard(
                        buf_text, encoder=encoder, projection=projection, part=part,
                        batch_size=batch_size, max_chars=max_chars, pbar=pbar, lines=buf_lines,
                        last_line=last_line, stats=stats, lang=None if lang == UNDETERMINED else lang,
                    )
                    last_line = buf_lines[-1]
                    shards.append(write_shard(out_dir, idx, emb.astype(dtype, copy=False), buf_lines, buf_text,
                                              ids=buf_ids, positions=buf_pos))
                    save_progress()
                    info.encoded += len(buf_text)
                    for buf in (buf_text, buf_lines, buf_ids, buf_pos):
                        if buf is not None:
                            buf.clear()
                    if on_shard_done is not None:
                        on_shard_done(idx, sum(s["rows"] for s in shards))

                if splitter is None:
                    rows = reader.sentences(max_chars=max_chars, stats=stats, ids=buf_ids)
                else:
                    rows = reader.split_into_sentences(splitter, max_chars=max_chars, stats=stats, ids=buf_ids,
                                                       positions=buf_pos)
                for line_no, sentence in rows:
                    if skip:
                        for buf in (buf_ids, buf_pos):
                            if buf is not None:
                                buf.clear()
                        skip -= 1
                        last_line = line_no
                        if pbar is not None and skip == 0:
                            pbar.update(line_no)
                        continue
                    buf_text.append(sentence)
                    buf_lines.append(line_no)
                    if len(buf_text) >= shard_rows:
                        flush()
                if skip:
                    raise ArtefactError(
                        f"{out_dir}: the interrupted run recorded more sentences than {input_path} holds"
                    )
                if buf_text:
                    flush()
                if pbar is not None:
                    pbar.update(n_lines - pbar.n)
            finally:
                if pbar is not None:
                    pbar.close()

        def save_ray_progress(prefix: list[dict], rest: list[dict]) -> None:
            shards[:], more[:] = prefix, rest
            save_progress()

        try:
            if ray is not None:
                from xmine.store.ray_writer import embed_shards_on_ray

                shards, info.encoded = embed_shards_on_ray(
                    input_path, out_dir, encoder=encoder, projection=projection, part=part, dtype=dtype,
                    lang=None if lang == UNDETERMINED else lang, shard_rows=shard_rows, batch_size=batch_size,
                    max_chars=max_chars, done=list(shards), more=list(more), stats=stats,
                    save_progress=save_ray_progress, show_progress=show_progress)
                info.resumed_rows = sum(s["rows"] for s in shards) - info.encoded
            else:
                _embed_here()
        except BaseException:
            if not shards and not more:  # nothing finished: no progress file to mistake for a store
                with contextlib.suppress(FileNotFoundError):
                    (out_dir / PROGRESS).unlink()
                if out_dir != target and {e.name for e in out_dir.iterdir()} <= {MARKER, LOCK}:
                    shutil.rmtree(out_dir, ignore_errors=True)
            raise
        for message in stats.warnings(max_chars):  # after the bar, so the lines do not mix
            log.warning(message)
        input_stats = {
            "lines": stats.lines, "sentences": stats.sentences, "empty_lines": stats.empty_lines,
            "long_lines": stats.long_count, "replaced": stats.replaced_count, "gzip": stats.gzip,
            "token_cut_lines": stats.token_cut_count, "compression": stats.compression, "format": reader.format,
        }
        if splitter is not None:  # the records split: `sentences` counts them, the store's count the rows
            input_stats["split_sentences"] = splitter.describe()
        _finalise(out_dir, identity, shards, input_stats, params={
            "input": str(input_path), "lang": lang, "part": stored_part, "dtype": dtype,
            "shard_rows": shard_rows, "batch_size": batch_size, "max_chars": max_chars, "ray": ray,
        })
        if out_dir != target:
            swap_in_dir(out_dir, target)
            out_dir = target
        store = EmbeddingStore.open(out_dir)
        info.seconds = time.perf_counter() - t0
        store.build_info = info
        return store


class StoreWriter:
    """Write a store from embeddings computed elsewhere (a cluster job, a synthetic benchmark).

        with StoreWriter(out_dir, encoder=fp, lang="de", dim=384) as w:
            for emb, sentences, line_numbers in blocks:
                w.add(emb, sentences, line_numbers)
        store = w.store

    Rows are buffered to `shard_rows` and written as `embed_corpus` writes them; `close()` (the
    end of the `with`) finalises the store. The directory is claimed like every output
    (xmine.outputs): new or empty, an unfinished store (started again), or a finished one with
    `overwrite=True`; a foreign directory and a second writer are refused. Not resumable:
    `embed_corpus` is the resumable path from text. Memory: one shard.
    """

    def __init__(self, out_dir: str | Path, *, encoder: dict[str, Any], lang: str, dim: int,
                 part: str = "raw", projection: dict[str, Any] | None = None, dtype: str = "float16",
                 shard_rows: int = 50_000, source: dict[str, Any] | None = None,
                 params: dict[str, Any] | None = None, overwrite: bool = False):
        if dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if part not in ("raw",) + PARTS or (part == "raw") != (projection is None):
            raise ConfigError(f"part {part!r} with projection {projection}: raw needs no projection, "
                              "meaning/language need one")
        if shard_rows < 1 or dim < 1:
            raise ConfigError("shard_rows and dim must be >= 1")
        self.out_dir = Path(out_dir)
        self.dim, self.dtype, self.shard_rows = dim, dtype, shard_rows
        self.identity = {"input": source or {"path": None}, "encoder": encoder, "projection": projection,
                         "part": part, "dtype": dtype, "lang": lang, "max_chars": None}
        self.params = {"lang": lang, "part": part, "dtype": dtype, "shard_rows": shard_rows, **(params or {})}
        self.overwrite = overwrite
        self.shards: list[dict[str, Any]] = []
        self.store: EmbeddingStore | None = None
        self._emb: list[np.ndarray] = []
        self._text: list[str] = []
        self._lines: list[np.ndarray] = []
        self._rows = 0
        self._next_line = 1
        self._lock = contextlib.ExitStack()

    def __enter__(self) -> "StoreWriter":
        d = self.out_dir
        # The same rules as every output (xmine.outputs): new, empty, an unfinished store (redone),
        # or a finished one with overwrite; never a foreign directory; one writer.
        claim = self._lock.enter_context(claim_output(d, kind=STORE_KIND, form="dir", in_place=True,
                                                      overwrite=self.overwrite, legacy=_looks_like_store))
        try:
            self._lock.enter_context(_locked(d))
            if claim.state != "new":
                _clear_dir(d)
        except BaseException:
            self._lock.close()
            raise
        return self

    def add(self, emb: np.ndarray, sentences: Sequence[str], line_numbers: Sequence[int] | None = None) -> None:
        """Append rows: embeddings (r, dim), their sentences, and 1-based input lines (default: running)."""
        emb = np.asarray(emb)
        if emb.ndim != 2 or emb.shape[1] != self.dim or len(emb) != len(sentences):
            raise ConfigError(f"add(): embeddings {emb.shape} for {len(sentences)} sentences, dim {self.dim}")
        with np.errstate(over="ignore"):  # a value beyond float16's range becomes inf, refused here
            finite = np.isfinite(emb.astype(self.dtype, copy=False)).all(axis=1)
        if not finite.all():
            raise ConfigError(f"add(): embedding {int(np.argmin(finite))} of this batch is not finite (NaN or inf)")
        bad = next((i for i, s in enumerate(sentences) if "\n" in s or "\r" in s), None)
        if bad is not None:
            raise ConfigError(f"add(): sentence {bad} contains a line break")
        if line_numbers is None:
            line_numbers = np.arange(self._next_line, self._next_line + len(sentences))
        line_numbers = np.asarray(line_numbers, dtype=np.int64)
        if len(line_numbers):
            self._next_line = int(line_numbers[-1]) + 1
        pos = 0
        while pos < len(sentences):
            take = min(self.shard_rows - self._rows, len(sentences) - pos)
            self._emb.append(emb[pos: pos + take].astype(self.dtype, copy=False))
            self._text.extend(sentences[pos: pos + take])
            self._lines.append(line_numbers[pos: pos + take])
            self._rows += take
            pos += take
            if self._rows == self.shard_rows:
                self._flush()

    def _flush(self) -> None:
        if not self._rows:
            return
        self.shards.append(write_shard(self.out_dir, len(self.shards), np.concatenate(self._emb),
                                       np.concatenate(self._lines), self._text))
        self._emb, self._text, self._lines, self._rows = [], [], [], 0

    def close(self) -> EmbeddingStore:
        """Write the last shard and finalise; returns the opened store."""
        self._flush()
        if not self.shards:
            raise ConfigError(f"{self.out_dir}: no rows were added")
        count = sum(s["rows"] for s in self.shards)
        _finalise(self.out_dir, self.identity, self.shards, {"sentences": count}, params=self.params)
        self.store = EmbeddingStore.open(self.out_dir)
        return self.store

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.close()
        finally:
            self._lock.close()


def _finalise(out_dir: Path, identity: dict, shards: list[dict], stats: dict, *, params: dict) -> None:
    """Join per-shard line numbers and texts (with the row index: offsets, hashes, lengths), write
    the manifest, drop the progress file. Memory: one shard's text at a time, plus 8 bytes a row
    to count the distinct sentences at the end."""
    count = sum(s["rows"] for s in shards)
    with contextlib.ExitStack() as stack:
        arrays = {}
        for name, dtype, shape in ((LINE_NUMBERS, np.int64, count), (OFFSETS, np.uint64, count + 1),
                                   (HASHES, np.uint64, count), (LENGTHS, np.int32, count)):
            tmp = stack.enter_context(atomic_path(out_dir / name))
            arrays[name] = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=(shape,))
        text_tmp = stack.enter_context(atomic_path(out_dir / SENTENCES))
        arrays[OFFSETS][0] = 0
        pos, offset = 0, 0
        with open(text_tmp, "wb") as out:
            for s in shards:
                rows = s["rows"]
                arrays[LINE_NUMBERS][pos: pos + rows] = np.load(out_dir / s["lines_file"])
                with open(out_dir / s["text_file"], "rb") as f:
                    raw = f.read()
                out.write(raw)
                index = RowIndex.scan([line + b"\n" for line in raw.split(b"\n")[:-1]], count=rows)
                arrays[OFFSETS][pos + 1: pos + rows + 1] = index.offsets[1:] + np.uint64(offset)
                arrays[HASHES][pos: pos + rows] = index.hashes
                arrays[LENGTHS][pos: pos + rows] = index.lengths
                pos += rows
                offset += len(raw)
        for a in arrays.values():
            a.flush()
        unique = int(len(np.unique(np.asarray(arrays[HASHES])))) if count else 0
        arrays.clear()
        if shards and all("ids_file" in s for s in shards):
            _join_ids(out_dir, shards, count, stack)
        if shards and all("sent_file" in s for s in shards):
            tmp = stack.enter_context(atomic_path(out_dir / SENTENCE_INDEX))
            joined = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.int32, shape=(count,))
            pos = 0
            for s in shards:
                joined[pos: pos + s["rows"]] = np.load(out_dir / s["sent_file"])
                pos += s["rows"]
            joined.flush()
            del joined
    stats = {**stats, "unique_sentences": unique}
    body = {
        **{k: identity[k] for k in ("encoder", "projection", "part", "dtype", "lang", "max_chars")},
        "count": count,
        "dim": shards[0]["dim"],
        "input": identity["input"],
        "input_stats": stats,
        "shards": [{k: s[k] for k in ("file", "rows", "bytes", "sha256")} for s in shards],
        "files": {name: {"bytes": (out_dir / name).stat().st_size, "sha256": sha256_file(out_dir / name)}
                  for name in (SENTENCES, LINE_NUMBERS, OFFSETS, HASHES, LENGTHS, IDS, ID_OFFSETS, SENTENCE_INDEX)
                  if name in (SENTENCES, LINE_NUMBERS, OFFSETS, HASHES, LENGTHS) or (out_dir / name).is_file()},
        "provenance": provenance(**params),
    }
    write_manifest(out_dir, STORE_KIND, body, format_version=FORMAT_VERSION)
    _remove_leftovers(out_dir, body)


def _join_ids(out_dir: Path, shards: list[dict], count: int, stack: contextlib.ExitStack) -> None:
    """`ids.txt` (one record id a row) and its byte offsets `id_offsets.npy`, from the shards'."""
    offsets_tmp = stack.enter_context(atomic_path(out_dir / ID_OFFSETS))
    offsets = np.lib.format.open_memmap(offsets_tmp, mode="w+", dtype=np.uint64, shape=(count + 1,))
    offsets[0] = 0
    pos, offset = 0, 0
    with open(stack.enter_context(atomic_path(out_dir / IDS)), "wb") as out:
        for s in shards:
            with open(out_dir / s["ids_file"], "rb") as f:
                raw = f.read()
            out.write(raw)
            sizes = np.fromiter((len(x) + 1 for x in raw.split(b"\n")[:-1]), dtype=np.uint64, count=s["rows"])
            offsets[pos + 1: pos + s["rows"] + 1] = offset + np.cumsum(sizes, dtype=np.uint64)
            pos += s["rows"]
            offset += len(raw)
    offsets.flush()
    del offsets


def _remove_leftovers(out_dir: Path, manifest: dict) -> None:
    """Remove the build's scaffolding (progress file, per-shard text and line numbers, temporaries),
    each by the exact name the writer gives it: nothing else in the directory is touched."""
    keep = ({MANIFEST, SENTENCES, LINE_NUMBERS, OFFSETS, HASHES, LENGTHS, IDS, ID_OFFSETS, SENTENCE_INDEX, LOCK,
             MARKER}
            | {s["file"] for s in manifest["shards"]})
    for entry in out_dir.iterdir():
        if entry.name not in keep and _own_file(entry.name) and entry.is_file():
            entry.unlink()


def _remove_temporaries(out_dir: Path) -> None:
    """Remove half-written files a killed run left (the writer's own hidden temporaries only)."""
    for entry in out_dir.iterdir():
        if _OWN_TEMPORARY.match(entry.name) and entry.is_file():
            entry.unlink()


__all__ = ["BuildInfo", "StoreWriter", "embed_corpus", "write_shard"]
