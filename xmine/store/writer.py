"""Writing an embedding store (see xmine.store for the layout): `embed_corpus`.

How `embed_corpus` builds it: the corpus is streamed and cut into shards of `shard_rows`
sentences, each encoded and written by a `ShardWriter` unit (xmine.store.shards) in this process
or in an actor pool on a Ray cluster (`xmine.exec.executor`), so memory stays bounded whatever the
corpus size. Each finished shard (embeddings,
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

The steps, in order: `_check_request`, `_finished_or_build_dir`, `resume` (xmine.store.resume),
`_encode_shards`, `finalise` (xmine.store.directory).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from xmine.artefacts.directory import reader_for
from xmine.io.corpus import DEFAULT_MAX_CHARS, CorpusStats
from xmine.encoders.external import ExternalEmbeddings
from xmine.encoders.pool import model_actors, run_device, worker_encoder
from xmine.errors import ArtefactError, ConfigError, DamagedManifestError, InputError
from xmine.exec.executor import LOCAL, Executor, Recipe, ShardProgress, executor_for
from xmine.artefacts.fileio import MANIFEST, MARKER, read_manifest, swap_in_dir
from xmine.artefacts.outputs import claim_output
from xmine.io.readers import open_corpus
from xmine.io.stdin import shown_path
from xmine.artefacts.records import ShardRecord
from xmine.encoders.projection import PROJECTION_KIND, resolve_projection
from xmine.io.sentences import sentence_splitter
from xmine.langs import UNDETERMINED
from xmine.store.directory import clear_dir, finalise, lock_store_dir, rebuild_dir, refuse_foreign, remove_leftovers
from xmine.store.layout import DEFAULT_DTYPE, DTYPES, LOCK, PARTS, PROGRESS, STORE_KIND
from xmine.store.reader import EmbeddingStore
from xmine.store.resume import Progress, identity_mismatch, resume, shard_intact
from xmine.store.shards import ACTOR_THREADS, EncodedShard, ShardWriter

log = logging.getLogger("xmine.store")


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
    #: where the encoder ran ("cpu", "cuda", ...; None: vectors read from a file)
    device: str | None = None


@dataclass(kw_only=True)
class _Job:
    """One embed request, checked: what is read and how, how it is encoded, and the identity a
    finished store (or an interrupted run) must match to serve it."""

    input_path: Path
    reader: Any
    splitter: Any
    encoder: Any
    projection: Any
    part: str
    dtype: str
    lang: str
    batch_size: int
    max_chars: int
    identity: dict[str, Any]
    #: where the shards' units run: LOCAL streams the corpus here; a cluster encodes shard ranges
    executor: Executor = LOCAL


def _check_request(input_path: Path, *, encoder: Any, lang: str, projection: Any, part: str, dtype: str,
                   shard_rows: int, batch_size: int, max_chars: int, ray: str | None, input_format: Any) -> _Job:
    """Check the options, the projection and the input (every record of a structured format)
    before anything is created on disk; the request's identity."""
    if dtype not in DTYPES:
        raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if part not in PARTS:
        raise ConfigError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    if shard_rows < 1 or batch_size < 1 or max_chars < 1:
        raise ConfigError("shard_rows, batch_size and max_chars must be >= 1")
    if isinstance(encoder, ExternalEmbeddings) and ray is not None:  # before a cluster is started for nothing
        raise ConfigError("--embeddings stores the vectors of the corpus' lines as they are: it takes neither "
                          "--split-sentences nor --ray")
    executor = executor_for(ray)  # join the cluster first: a wrong address fails before any work
    projection = resolve_projection(projection)
    enc_fp = encoder.fingerprint()
    if projection is not None:
        projection.check_encoder(enc_fp)
        stored_part = part
    elif part == "language":
        raise ConfigError("part 'language' needs a projection (raw embeddings have no language part)")
    else:
        stored_part = "raw"

    splitter = None
    if input_format is not None and input_format.split_sentences:
        # Before the input is read: a missing language or splitter library fails at once.
        splitter = sentence_splitter(None if lang == UNDETERMINED else lang, what=str(input_path))
    reader = open_corpus(input_path, input_format)

    if isinstance(encoder, ExternalEmbeddings):  # rows from a file: one per line of the corpus
        if splitter is not None:
            raise ConfigError("--embeddings stores the vectors of the corpus' lines as they are: it takes neither "
                              "--split-sentences nor --ray")
        encoder.bind(reader, shard_rows=shard_rows)
    identity = {
        "input": {**reader.identity(), **({"split_sentences": splitter.describe()} if splitter else {}),
                  **({"embeddings": encoder.identity()} if isinstance(encoder, ExternalEmbeddings) else {})},
        "encoder": enc_fp,
        "projection": projection.fingerprint() if projection is not None else None,
        "part": stored_part,
        "dtype": dtype,
        "lang": lang,
        "max_chars": max_chars,
    }
    return _Job(input_path=input_path, reader=reader, splitter=splitter, encoder=encoder, projection=projection,
                part=part, dtype=dtype, lang=lang, batch_size=batch_size, max_chars=max_chars, identity=identity,
                executor=executor)


def _finished_or_build_dir(out_dir: Path, identity: dict[str, Any], overwrite: bool) -> tuple[EmbeddingStore | None, Path]:
    """(the finished store at `out_dir` when it already serves the request, None) or (None, the
    directory to build in: `out_dir` itself, or the hidden rebuild folder beside a finished store
    that is to be replaced)."""
    has_manifest = (out_dir / MANIFEST).is_file()
    if not has_manifest and not (out_dir / PROGRESS).is_file() and any(
            e.name not in (LOCK, MARKER) and not e.name.startswith(".") for e in out_dir.iterdir()):
        # Ours (marker or store file names) but neither finished nor resumable.
        if not overwrite:
            raise ArtefactError(f"{out_dir}: unfinished or damaged embedding store (no {MANIFEST}, no "
                                f"{PROGRESS}); pass --overwrite to rebuild it")
        clear_dir(out_dir)
    if not has_manifest:
        return None, out_dir
    try:
        manifest = read_manifest(out_dir, STORE_KIND)  # refuses a directory of another kind
    except DamagedManifestError as e:  # (a store by the kind it records: the caller's claim_output checked)
        if not overwrite:
            raise DamagedManifestError(e.path, "pass --overwrite to rebuild the store") from None
        log.warning(f"{e}; building the store again")
        refuse_foreign(out_dir)
        return None, rebuild_dir(out_dir)
    why = identity_mismatch(manifest, identity, where=str(out_dir / MANIFEST))
    if why is None:
        try:
            store = EmbeddingStore.open(out_dir)
            store.verify()  # "already finished" is a promise about the content too
        except ArtefactError as e:
            if not overwrite:
                raise ArtefactError(f"{e}; pass --overwrite to rebuild the store") from None
            why = str(e)
            # (was: silent, where `mine` rebuilds the damaged work store of an unfinished run)
            log.warning(f"{why}; building the store again")
        else:
            remove_leftovers(out_dir, store.manifest.to_dict())  # its names checked by the open
            return store, out_dir
    if not overwrite:
        raise ArtefactError(f"{out_dir}: an embedding store already, but {why}; "
                            "pass --overwrite to rebuild it or choose another output directory")
    # Built beside the finished store and swapped in at the end: until then the old store
    # stays whole and usable, whatever interrupts the rebuild.
    refuse_foreign(out_dir)
    return None, rebuild_dir(out_dir)


def embed_corpus(input_path: str | Path, out_dir: str | Path, *, encoder: Any, lang: str, projection: Any = None,
                 part: str = "meaning", dtype: str = DEFAULT_DTYPE, shard_rows: int = 50_000, batch_size: int = 64,
                 max_chars: int = DEFAULT_MAX_CHARS, overwrite: bool = False, show_progress: bool = False,
                 on_shard_done: Callable[[int, int], None] | None = None, ray: str | None = None,
                 input_format: Any = None,
                 reported_as: Callable[[CorpusStats], CorpusStats] | None = None) -> EmbeddingStore:
    """Embed a corpus (a text file, one sentence a line, or any format of `xmine.io.readers`) into an
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
    actor pool on that cluster (each actor loads the encoder once), writing the same store, for
    every input format.

    `reported_as`: what the read's warnings (lines cut, characters replaced) say, given what it
    found: the same counts with the file and lines the user knows (`xmine score` embeds a staged
    copy of a bitext's side and names the bitext's own lines). None: the input as read.

    `input_format`: an `xmine.io.reader_base.InputFormat` (format, text field, id field); None reads by
    extension. Every record of a non-text input is checked before anything is written; a row's
    record number is stored as its line number, and its id (with an id field) in `ids.txt`. With
    `split_sentences` each record is split by `lang`'s splitter (xmine.io.sentences; a ConfigError
    before anything is written when `lang` is undetermined): a row per sentence, its 1-based index
    in the record in `sentence_index.npy`, the splitter in the input identity.

    Returns the opened store; its `build_info` says what this call did. See the module doc for
    the resume rules.
    """
    input_path, out_dir = Path(input_path), Path(out_dir)
    t0 = time.perf_counter()
    job = _check_request(input_path, encoder=encoder, lang=lang, projection=projection, part=part, dtype=dtype,
                         shard_rows=shard_rows, batch_size=batch_size, max_chars=max_chars, ray=ray,
                         input_format=input_format)
    # Refuses an input as output, a foreign or other-kind directory, and a second writer.
    with claim_output(out_dir, kind=STORE_KIND, form="dir", in_place=True, reopen=True, overwrite=overwrite,
                      inputs=[input_path, getattr(job.projection, "path", None)]), \
            lock_store_dir(out_dir):
        info = BuildInfo()
        # a link to a store on a bigger disk is followed: a rebuild is made beside the store it names and
        # swapped in there (was: beside the link, which was then replaced by the new store, the old one
        # left where the link had pointed)
        target = Path(os.path.realpath(out_dir)) if out_dir.is_symlink() else out_dir
        store, build_dir = _finished_or_build_dir(target, job.identity, overwrite)  # (a rebuild: beside it)
        info.already_done = store is not None
        if store is None:
            progress = resume(build_dir, job.identity, overwrite)
            _check_same_cut(build_dir, progress, shard_rows, overwrite)
            info.resumed_rows = sum(s.rows for s in progress.shards)
            if info.resumed_rows:
                log.info(f"{build_dir}: resuming after {len(progress.shards)} finished shard(s), "
                         f"{info.resumed_rows} sentences")
            progress.save()
            stats = CorpusStats(path=Path(shown_path(input_path)))  # warnings name a URL or `-`, not a local copy
            try:
                _encode_shards(job, build_dir, progress, info, stats, shard_rows=shard_rows,
                               show_progress=show_progress, on_shard_done=on_shard_done)
            except BaseException:
                # Nothing recorded and nothing written: no progress file to mistake for a store. A shard
                # written but not yet recorded (an actor finished as the run was stopped) keeps it, so
                # the same command resumes (that shard is encoded again) rather than refusing the folder.
                if not progress.shards and not progress.more and {e.name for e in build_dir.iterdir()} <= {
                        MARKER, LOCK, progress.path.name}:
                    with contextlib.suppress(FileNotFoundError):
                        progress.path.unlink()
                    if build_dir != target:
                        shutil.rmtree(build_dir, ignore_errors=True)
                raise
            # (was: finished, recording the input as it was when the run began, not what it embedded)
            if (change := job.reader.changed_since(job.identity["input"])) is not None:
                raise InputError(shown_path(input_path), f"changed while it was embedded ({change}); no store "
                                 "finished: embed it again, with --overwrite, once it is complete")
            shown = reported_as(stats) if reported_as is not None else stats
            for message in shown.warnings(max_chars):  # after the bar, so the lines do not mix
                log.warning(message)
            recorded = finalise(build_dir, job.identity, progress.shards,
                                _input_stats(stats, job, rows=sum(s.rows for s in progress.shards)), params={
                "input": shown_path(input_path), "lang": lang, "part": job.identity["part"], "dtype": dtype,
                "shard_rows": shard_rows, "batch_size": batch_size, "max_chars": max_chars, "ray": ray,
                # what ran the encoder (its fingerprint names a runtime only where it is not torch)
                "device": info.device, "runtime": None if info.device is None else (
                    getattr(encoder, "engine", None) or getattr(encoder, "runtime", "torch")),
            })
            if recorded.get("records_sharing_an_id"):
                shared, where = recorded["shared_id"], shown_path(input_path)
                log.warning("%s: %d records share their id with another record (id field %r: %r at %s); the "
                            "ids in mined pairs will not tell them apart", where, recorded["records_sharing_an_id"],
                            job.reader.spec.id_field, shared["id"],
                            " and ".join(f"{where}:{line}" for line in shared["lines"]))
            if build_dir != target:
                # checked again: a file put into the store while this one was built (hours, for a large
                # corpus) would go with the old store (was: checked at the start only)
                refuse_foreign(target, built=build_dir)
                swap_in_dir(build_dir, target)
            store = EmbeddingStore.open(out_dir)
        info.seconds = time.perf_counter() - t0
        store.build_info = info
        return store


def _check_same_cut(out_dir: Path, progress: Progress, shard_rows: int, overwrite: bool) -> None:
    """Refuse to resume shards cut at another --shard-rows: none of them would be kept, so the run
    would encode everything again under a message saying it resumes. Every finished shard but the
    input's last holds exactly the rows of its cut, so two short ones, or one too long, tell."""
    rows = [s.rows for s in [*progress.shards, *progress.more.values()]]
    if overwrite or not rows:
        return
    if max(rows) > shard_rows or sum(r < shard_rows for r in rows) > 1:
        raise ConfigError(f"{out_dir}: holds an interrupted run cut into shards of {max(rows)} rows, not --shard-rows "
                          f"{shard_rows}: run with --shard-rows {max(rows)} to resume its {len(rows)} finished "
                          "shard(s), or pass --overwrite to encode everything again")


def _encode_shards(job: _Job, out_dir: Path, progress: Progress, info: BuildInfo, stats: CorpusStats, *,
                   shard_rows: int, show_progress: bool, on_shard_done: Callable[[int, int], None] | None) -> None:
    """Stream the corpus, cut it into shards of `shard_rows` sentences, and hand each shard not
    finished by an earlier run to the job's executor (`ShardWriter`: in this process, or an actor
    pool on a cluster), recording each in the progress file as it is written. Shards may finish
    out of order on a cluster: the progress file keeps the finished prefix as "shards" and the
    others as "more_shards". Memory: the shard being read, and one per busy worker."""
    executor = job.executor
    finished: dict[int, ShardRecord] = dict(enumerate(progress.shards))
    # and those an interrupted run finished after a gap
    finished.update((i, record) for i, record in progress.more.items() if shard_intact(out_dir, record))
    spans: dict[int, int] = {}  # input lines each shard covers, for the progress bar
    encoded: dict[int, EncodedShard] = {}

    def units(bar: ShardProgress):
        shard, last_line, text, lines = 0, 0, [], []
        ids: list | None = [] if job.reader.has_ids else None  # filled by the reader beside each row
        positions: list | None = [] if job.splitter is not None else None
        if job.splitter is None:
            rows = job.reader.sentences(max_chars=job.max_chars, stats=stats, ids=ids)
        else:
            rows = job.reader.split_into_sentences(job.splitter, max_chars=job.max_chars, stats=stats, ids=ids,
                                                   positions=positions)
        for line_no, sentence in itertools.chain(rows, [(None, None)]):
            if line_no is not None:
                text.append(sentence)
                lines.append(line_no)
                if len(text) < shard_rows:
                    continue
            if not text:
                break
            spans[shard] = lines[-1] - last_line
            done = finished.get(shard)
            if done is not None and done.rows != len(text):  # recorded for another cut: encode it again
                log.warning(f"{out_dir / done.file}: recorded with {done.rows} rows, not {len(text)}; encoding it again")
                del finished[shard]
                done = None
            if done is None:
                yield (shard, text, lines, None if ids is None else list(ids),
                       None if positions is None else list(positions), last_line)
            else:
                bar.resumed(spans.pop(shard))
            shard, last_line, text, lines = shard + 1, lines[-1], [], []
            for buf in (ids, positions):
                if buf is not None:
                    buf.clear()
        if any(i >= shard for i in finished):
            raise ArtefactError(f"{out_dir}: the interrupted run recorded more sentences than {job.input_path} holds")

    def save_progress() -> None:
        prefix = list(itertools.takewhile(finished.__contains__, itertools.count()))
        progress.shards, progress.more = [finished[i] for i in prefix], {
            i: r for i, r in sorted(finished.items()) if i >= len(prefix)}
        progress.save()

    actors, use_gpu = model_actors(job.encoder, executor, ACTOR_THREADS)
    info.device = run_device(job.encoder, executor, use_gpu=use_gpu)
    projection = None if job.projection is None else Recipe(
        functools.partial(reader_for(PROJECTION_KIND), getattr(job.projection, "path", None)), made=job.projection)
    worker = dict(encoder=worker_encoder(job.encoder, use_gpu=use_gpu, threads=ACTOR_THREADS), projection=projection,
                  out_dir=str(out_dir), part=job.part, dtype=job.dtype, batch_size=job.batch_size,
                  max_chars=job.max_chars, lang=None if job.lang == UNDETERMINED else job.lang)
    # (a count of records: split into sentences they make more rows, not known before the split)
    if actors > 1 and job.splitter is None and job.reader.count < 2 * actors * shard_rows:
        log.warning(f"fewer than {2 * actors} shards of {shard_rows} rows for {actors} encoder actor(s): the last "
                    "shards run while actors idle; a --shard-rows of a fraction of the corpus balances the work")
    desc = f"embed {job.input_path.name}" + (f" ({executor.name}, {actors} actors)" if actors > 1 else "")
    pool = executor.actor_pool(ShardWriter, worker, actors=actors, gpus=int(use_gpu),
                               cpus=0 if use_gpu else ACTOR_THREADS)
    with contextlib.closing(pool), ShardProgress(shards=None, rows=job.reader.count, desc=desc, unit=" lines",
                             enabled=show_progress) as bar:
        for result in pool.map(units(bar), progress=bar):
            finished[result.index], encoded[result.index] = result.record, result
            save_progress()
            info.encoded += result.record.rows
            if on_shard_done is not None:
                on_shard_done(result.index, sum(r.rows for r in finished.values()))
            bar.done(spans.pop(result.index))
        bar.complete()
    save_progress()  # every shard finished: the prefix is all of them, also when none was encoded now
    info.resumed_rows = sum(r.rows for r in finished.values()) - info.encoded  # the prefix and after a gap
    for i in sorted(encoded):  # token cuts in the order of the input, however the shards finished
        if encoded[i].token_cut_lines:
            stats.note_token_cuts(encoded[i].token_cut_lines, encoded[i].max_tokens)


def _input_stats(stats: CorpusStats, job: _Job, rows: int) -> dict[str, Any]:
    """What the manifest records about the input as read (`rows`: the store's)."""
    input_stats = {
        "lines": stats.lines, "sentences": stats.sentences, "empty_lines": stats.empty_lines,
        "long_lines": stats.long_count, "replaced": stats.replaced_count, "gzip": stats.gzip,
        "token_cut_lines": stats.token_cut_count, "compression": stats.compression, "format": job.reader.format,
    }
    if job.splitter is not None:  # records split into sentences: `sentences` counts the rows they gave
        input_stats.update(records=stats.sentences, sentences=rows, split_sentences=job.splitter.describe())
    return input_stats


__all__ = ["BuildInfo", "UNDETERMINED", "embed_corpus"]
