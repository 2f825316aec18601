"""Resuming an interrupted embedding-store build: the identity a run records (input, encoder,
projection, part, dtype, language, `max_chars`) and why another request cannot continue it, the
progress file, and the shards of an interrupted run that are intact on disk."""

from __future__ import annotations

import itertools
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xmine.errors import ArtefactError
from xmine.artefacts.fileio import atomic_write_json, check_names, inside, sha256_file
from xmine.langs import same_language
from xmine.artefacts.records import (EncoderFingerprint, FileRecord, ProjectionFingerprint, ShardRecord,
                                     legacy_folder_note, read_field)
from xmine.store.directory import clear_dir, remove_temporaries
from xmine.store.layout import PROGRESS, shard_names

log = logging.getLogger("xmine.store")


def identity_mismatch(old: dict[str, Any], new: dict[str, Any], *, where: str) -> str | None:
    """Why a store (or interrupted run) with identity `old`, read from `where`, cannot serve request
    `new`, or None."""
    if (old["input"]["size"], old["input"]["sha256"]) != (new["input"]["size"], new["input"]["sha256"]):
        return (
            f"it was made from another input file ({old['input']['path']}, {old['input']['size']} bytes, "
            f"sha256 {old['input']['sha256'][:12]}...) than {new['input']['path']} "
            f"({new['input']['size']} bytes, sha256 {new['input']['sha256'][:12]}...)"
        )
    was_file, now_file = old["input"].get("embeddings"), new["input"].get("embeddings")  # --embeddings FILE
    if (was_file and (was_file["size"], was_file["sha256"], was_file["by"])) != \
            (now_file and (now_file["size"], now_file["sha256"], now_file["by"])):
        return (f"it was made from {'embeddings ' + was_file['path'] if was_file else 'an encoder'}, not "
                f"{'embeddings ' + now_file['path'] if now_file else 'an encoder'}, or that file changed")
    # how the input was read (xmine.io.readers) and split into sentences (xmine.io.sentences)
    for key in ("format", "text_field", "id_field", "split", "split_sentences"):
        if old["input"].get(key) != new["input"].get(key):
            if key == "split_sentences":
                return f"it was made {_split_words(old['input'])}, not {_split_words(new['input'])}"
            return f"its input was read with {key}={old['input'].get(key)!r}, not {new['input'].get(key)!r}"
    try:
        was = EncoderFingerprint.from_dict(old.get("encoder"), where=f"{where}: encoder")
        was_p = read_field(old, "projection", ProjectionFingerprint | None, where=where)
    except ArtefactError as e:
        return str(e)  # damaged: it serves nothing (--overwrite replaces it)
    now = EncoderFingerprint.from_dict(new["encoder"], where="the encoder's fingerprint")
    now_p = read_field(new, "projection", ProjectionFingerprint | None, where="the projection's fingerprint")
    if was.id != now.id:
        if was.id.weights == now.id.weights:
            p_old, p_new = was.run_precision, now.run_precision
            return f"it was made at encoder precision {p_old} (--precision {p_old}), not {p_new}"
        prompts = was.id.other_prompt_only(now.id)
        if prompts is not None:
            return f"it was made with the prompt {prompts[0]} (--prompt {prompts[0]}), not {prompts[1]}"
        if was.name == now.name:  # one name, another model: a folder whose weights, tokenizer or modules changed
            return (f"it was made with encoder {was.name!r} as it was then ({was.id.model}), and that model is "
                    f"{now.id.model} now: its weights, tokenizer or modules changed since{legacy_folder_note(was.id)}")
        return f"it was made with encoder {was.name!r} (--encoder {was.name}), not {now.name!r}"
    if (was_p and was_p.id) != (now_p and now_p.id):
        return f"it was made with {was_p or 'no projection'}, not {now_p or 'no projection'}"

    if not same_language(old.get("lang") or "", new.get("lang") or ""):  # de = deu = deu_Latn, not zho_Hans = zho_Hant
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
    lines = ", line breaks ending sentences" if how.get("line_breaks") else ""
    return f"with --split-sentences ({how.get('library')} {how.get('version')}, {how.get('lang')}{lines})"


#: a shard record's fields and the `shard_names` key of the file each names
_RECORD_FILES = (("file", "emb"), ("lines_file", "lines"), ("text_file", "text"), ("ids_file", "ids"),
                 ("sent_file", "sent"))


def shard_damage(out_dir: Path, shard: ShardRecord) -> str | None:
    """The first file of a finished shard that is not on disk as its record says, or None (one that
    resolves outside the store, a symbolic link out, is refused)."""
    recorded = {shard.file: FileRecord(bytes=shard.bytes, sha256=shard.sha256), **(shard.companions or {})}
    for name in [getattr(shard, f) for f, _ in _RECORD_FILES]:
        if name is not None and not inside(out_dir, name, what="embedding store").is_file():
            return name
    return next((n for n, r in recorded.items()
                 if (out_dir / n).stat().st_size != r.bytes or sha256_file(out_dir / n) != r.sha256), None)


def shard_intact(out_dir: Path, shard: ShardRecord) -> bool:
    """Whether the files of a finished shard are on disk as its record says (`shard_damage`)."""
    return shard_damage(out_dir, shard) is None


@dataclass(kw_only=True)
class Progress:
    """`progress.json` of a store being built: its finished shards, saved as each is written."""

    path: Path
    identity: dict[str, Any]
    shards: list[ShardRecord] = field(default_factory=list)
    #: shards finished after a gap (by shard index): units finish in any order on a cluster
    more: dict[int, ShardRecord] = field(default_factory=dict)

    def save(self) -> None:
        atomic_write_json(self.path, {"identity": self.identity, "shards": [s.to_dict() for s in self.shards],
                                      "more_shards": [{"index": i, **s.to_dict()} for i, s in self.more.items()]})

    def read(self, recorded: dict[str, Any]) -> None:
        """The finished shards `recorded` in `progress.json` (a damaged record, or one naming a file
        the writer does not make for that shard: ArtefactError)."""
        where = str(self.path)
        self.shards = [_shard_record(s, i, where=f"{where}: shards[{i}]")
                       for i, s in enumerate(recorded.get("shards", []))]
        self.more = {}
        for n, s in enumerate(recorded.get("more_shards", [])):
            index = read_field(s, "index", int, where=f"{where}: more_shards[{n}]")
            self.more[index] = _shard_record({k: v for k, v in s.items() if k != "index"}, index,
                                             where=f"{where}: more_shards[{n}]")


def _shard_record(d: Any, i: int, *, where: str) -> ShardRecord:
    """Shard i's record read from `progress.json`: its files must be shard i's own names."""
    record = ShardRecord.from_dict(d, where=where)
    names = shard_names(i)
    for attribute, key in _RECORD_FILES:
        if getattr(record, attribute) is not None:
            check_names([getattr(record, attribute)], {names[key]}, where=f"{where}: {attribute}",
                        what="embedding store")
    own = {getattr(record, attribute) for attribute, _ in _RECORD_FILES} - {None, record.file}
    check_names(list(record.companions or {}), own, where=f"{where}: companions", what="embedding store")
    return record


def resume(out_dir: Path, identity: dict[str, Any], overwrite: bool) -> Progress:
    """The progress of an interrupted run of the same request in `out_dir` (its intact shards),
    or a fresh one; an interrupted run of another request is refused, or discarded with
    `overwrite`."""
    progress = Progress(path=out_dir / PROGRESS, identity=identity)
    if progress.path.is_file():
        recorded = json.loads(progress.path.read_text(encoding="utf-8"))
        why = identity_mismatch(recorded["identity"], identity, where=str(progress.path))
        if why is not None and not recorded.get("shards"):
            why = None  # nothing finished yet (e.g. the input had a bad line): start afresh
            recorded["shards"] = []
        try:
            progress.read(recorded if why is None else {})
        except ArtefactError as e:
            why = str(e)
        if why is not None and not overwrite:
            raise ArtefactError(f"{out_dir}: holds an interrupted run, but {why}; "
                                "pass --overwrite to discard it or choose another output directory")
        if why is not None:
            clear_dir(out_dir)
        else:
            intact = list(itertools.takewhile(lambda shard: shard_intact(out_dir, shard), progress.shards))
            if len(intact) < len(progress.shards):  # kept: the prefix of the recorded shards intact on disk
                damaged = shard_damage(out_dir, progress.shards[len(intact)])
                log.warning(f"{out_dir / damaged}: damaged or missing; re-encoding from there")
                progress.more = {}  # re-encoded from the damaged shard on
            progress.shards = intact
    remove_temporaries(out_dir)
    return progress
