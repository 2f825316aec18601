"""`embed_corpus(..., ray=...)`: the shards of an embedding store encoded as units by a pool of encoders.

In one process, `embed_corpus` reads the corpus once, as a stream, and encodes each shard as it
fills. On a cluster the units must be independent: the driver makes one validating pass over the
corpus (`xmine.corpus.shard_ranges`): the byte offset, first line and sentence count of every
shard, exactly the shards the single-process run cuts. The executor (`xmine.executor.OnRay`, a
Ray Data actor pool) then hands each unfinished shard's range (a few numbers, not its text),
largest first, to a pool of encoders: each actor loads the encoder once (one GPU per
actor when the cluster has GPUs, else `threads` CPU threads), reads its range of the corpus
itself and writes the shard's files with the same `encode_shard` and `write_shard_record`
(`xmine.store.shards`) as the single-process path. The driver itself needs only the encoder's
fingerprint (`xmine embed --ray` passes a `LazyEncoder`, which for me5-small never loads the
model). The driver records each finished shard in `progress.json` as it arrives and, when all
are done, `embed_corpus` joins them exactly as it does in one process. So the store is the same: the same shards, rows, text and
manifest, and the same embedding bytes where the encoder computes the same numbers with
`threads` threads as the single process does with its own (tests/test_ray.py checks this).

Resuming: shards finish out of order. `progress.json` keeps its "shards" as the finished
prefix (what the single-process run resumes from) and the finished shards after a gap in
"more_shards"; a rerun with `--ray` verifies both (size, sha256) and encodes only the rest.
Ray re-runs the task of an actor that died (restarting the actor); a rewritten shard replaces
its files atomically.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any, Callable


from xmine.corpus import CorpusStats, iter_corpus, shard_ranges
from xmine.errors import ArtefactError
from xmine.executor import Executor, ShardProgress
from xmine.records import ShardRecord
from xmine.store.resume import shard_intact
from xmine.store.shards import encode_shard, write_shard_record

log = logging.getLogger("xmine.store")

#: CPU threads per encoder actor on CPU-only clusters (one actor per `threads` CPUs). One thread per
#: actor keeps every core busy through the tokeniser and the single-threaded parts of a forward
#: pass, where one process with a thread per core leaves cores idle.
DEFAULT_ACTOR_THREADS = 1


class ShardEncoder:
    """A Ray Data actor: loads the encoder (and projection) once, then encodes whole shards."""

    def __init__(self, *, input_path: str, out_dir: str, encoder_name: str, encoder_kwargs: dict,
                 projection_path: str | None, part: str, dtype: str, batch_size: int, max_chars: int, lang: str,
                 threads: int, use_gpu: bool, fingerprint: dict):
        from xmine.encoders.loader import load_worker_encoder
        from xmine.projection import resolve_projection

        self.encoder = load_worker_encoder(encoder_name, fingerprint=fingerprint, use_gpu=use_gpu, threads=threads,
                                           **encoder_kwargs)
        self.projection = resolve_projection(projection_path)
        self.input_path, self.out_dir = Path(input_path), Path(out_dir)
        self.part, self.dtype, self.batch_size, self.max_chars, self.lang = part, dtype, batch_size, max_chars, lang

    def __call__(self, idx: int, offset: int, line: int, rows: int, on_rows=None) -> tuple[int, ShardRecord]:
        """Shard `idx` (`rows` sentences from byte `offset`, line `line`) encoded and written: its record."""
        got = list(itertools.islice(iter_corpus(self.input_path, max_chars=self.max_chars, warn=False,
                                                start=(offset, line)), rows))
        if len(got) != rows or got[0][0] != line:
            raise ArtefactError(f"{self.input_path}: changed while being embedded (shard {idx} at line {line})")
        sentences, lines = [s for _, s in got], [n for n, _ in got]
        emb = encode_shard(sentences, encoder=self.encoder, projection=self.projection, part=self.part,
                           batch_size=self.batch_size, max_chars=self.max_chars, pbar=None, lines=lines,
                           last_line=0, lang=self.lang)
        return idx, write_shard_record(self.out_dir, idx, emb.astype(self.dtype, copy=False), lines, sentences)


def embed_shard_ranges(
    input_path: Path, out_dir: Path, *, executor: Executor, encoder: Any, projection: Any, part: str, dtype: str,
    lang: str, shard_rows: int, batch_size: int, max_chars: int, done: list[ShardRecord],
    more: dict[int, ShardRecord], stats: CorpusStats,
    save_progress: Callable[[list[ShardRecord], dict[int, ShardRecord]], None], show_progress: bool,
    threads: int = DEFAULT_ACTOR_THREADS,
) -> tuple[list[ShardRecord], int]:
    """Encode the shards of `input_path` not in `done` (the finished prefix) or `more` (finished
    after a gap, by index) as units of `executor`; return (all shard records in order, rows encoded).

    `save_progress(prefix, more)` is called after each finished shard.
    """
    ranges = shard_ranges(input_path, shard_rows, max_chars=max_chars, stats=stats, leading=[s.rows for s in done])
    finished: dict[int, ShardRecord] = dict(enumerate(done))
    for i, shard in more.items():
        if i < len(ranges) and ranges[i]["rows"] == shard.rows and shard_intact(out_dir, shard):
            finished[i] = shard
        else:
            log.warning(f"{out_dir / shard.file}: damaged, missing or of another cut; encoding it again")
    # Largest shards first (longest-processing-time order): the shards left running while other
    # actors idle at the end are then the small ones. Shards are recorded as they finish, in any order.
    todo = sorted((i for i in range(len(ranges)) if i not in finished), key=lambda i: (-ranges[i]["bytes"], i))

    def record_progress() -> None:
        prefix = list(itertools.takewhile(lambda i: i in finished, range(len(ranges))))
        rest = sorted(set(finished) - set(prefix))
        save_progress([finished[i] for i in prefix], {i: finished[i] for i in rest})

    encoded = 0
    if todo:
        use_gpu = executor.gpus() >= 1
        slots = executor.gpus() if use_gpu else max(1, executor.slots() // threads)
        actors = max(1, min(slots, len(todo)))
        if len(todo) < 2 * slots:
            log.warning(f"{len(todo)} shard(s) to encode for {slots} encoder actor(s): the last shards run while "
                        "actors idle; a --shard-rows of a fraction of the corpus balances the work")
        projection_path = projection.fingerprint()["path"] if projection is not None else None
        make_kwargs = dict(
            input_path=str(input_path), out_dir=str(out_dir), encoder_name=encoder.name,
            encoder_kwargs={"precision": getattr(encoder, "precision", "fp32"),
                            "runtime": getattr(encoder, "runtime", "torch")}, projection_path=projection_path,
            part=part, dtype=dtype, batch_size=batch_size, max_chars=max_chars, lang=lang, threads=threads,
            use_gpu=use_gpu, fingerprint=encoder.fingerprint())
        units = [(i, ranges[i]["offset"], ranges[i]["line"], ranges[i]["rows"]) for i in todo]
        rows_total = sum(r["rows"] for r in ranges)
        with ShardProgress(shards=len(ranges), shards_done=len(finished), rows=rows_total,
                           rows_done=rows_total - sum(ranges[i]["rows"] for i in todo),
                           desc=f"embed {input_path.name} ({executor.name}, {actors} actor{'s' * (actors > 1)})",
                           enabled=show_progress) as bar:
            for i, record in executor.map_actors(ShardEncoder, make_kwargs, units, actors=actors,
                                                 cpus=0 if use_gpu else threads, gpus=int(use_gpu), progress=bar):
                finished[i] = record
                record_progress()
                encoded += record.rows
                bar.done(record.rows)
    elif more:
        record_progress()
    return [finished[i] for i in range(len(ranges))], encoded
