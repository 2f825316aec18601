"""Claiming an output before writing it: the one place that decides what xmine may replace.

Every command that writes calls `claim_output` first, and writes only inside the claim:

    with claim_output(out, kind="mining-result", form="tsv", inputs=[src, tgt],
                      overwrite=overwrite, companions=(".meta", ".work")) as claim:
        with claim.atomic_file() as tmp: ...          # the TSV itself
        claim.finish({"pairs": 12})                     # OUT.json: kind, hashes, summary

The rules ("never lose a user's data"):

1. **An output is never an input.** Refused when the output (or one of its companions) is an
   input, contains one, or lies inside one; compared on resolved paths and on inode identity
   (hard links, bind mounts).
2. **Only xmine's own artefact of the same kind is ever replaced, and only with
   `overwrite=True`.** A foreign file or directory, an artefact of another kind, or an xmine file
   edited since it was written is refused with `OutputError` (exit 2) and left untouched. An
   empty directory counts as free. An *unfinished* artefact of the same kind (an interrupted
   run's) is continued or redone without `--overwrite`: it holds nothing finished. Its summary
   vouches only for the files that run renamed into place (their size and sha256, recorded just
   before each rename): any other file found at the output or a companion is refused.
3. **Atomic.** Files go through `atomic_path`, directories through `atomic_dir`; replacing an
   artefact removes only that artefact's own files.
4. **One writer.** An exclusive `fcntl` lock on `.NAME.lock` beside the output and beside each
   file claimed with it (removed when the claim ends); a second writer of any of them fails at once
   (`xmine.artefacts.output_locks`).

How an existing path is recognised as xmine's, and when it counts as finished:
`xmine.artefacts.output_state`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
import tempfile
from typing import Any, Callable, Iterable, Iterator

from xmine.errors import OutputError
from xmine.artefacts.fileio import (DIR_MODE, FILE_MODE, MANIFEST, MARKER, atomic_path, atomic_write_json,
                                    atomic_write_manifest, fsync_file, kind_label, read_json, remove_path, sha256_file,
                                    swap_in_dir, temporary_beside)
from xmine.artefacts.leftovers import remove_leftover_temporaries
from xmine.artefacts.output_locks import lock_outputs
from xmine.artefacts.output_state import (FORMS, check_not_input, dir_kind, output_state, removed_by_hand, sidecar_of,
                                          tree_record)

log = logging.getLogger(__name__)

#: files a run writes into its work directory before any result: the marker, and the key.json that
#: ties checkpoints to their inputs (mining/knn.py, approximate.py). A failed run that
#: left only these has nothing to resume.
SCAFFOLDING = frozenset({MARKER, "key.json"})


# ------------------------------------------------------------------------------ the claim


@dataclass
class ClaimRecord:
    """The outputs claimed while it records (`recording_claims`), each with its companions, and
    those finished: how `xmine.cli` tells a stop that came after a command's outputs were all
    complete from one that stopped them."""

    claimed: list = field(default_factory=list)
    finished: list = field(default_factory=list)

    def outputs(self) -> tuple[list[Path], list[Path]]:
        """(claimed, finished): not the work artefacts built inside another output's companion
        (the store of a text side in `OUT.work/`)."""
        inside = {p for p, _ in self.claimed for _, parts in self.claimed for c in parts if p.is_relative_to(c)}
        claimed = [p for p, _ in self.claimed if p not in inside]
        return claimed, [p for p in dict.fromkeys(self.finished) if p in claimed]


#: the records open now (none: claims are not recorded, so a long-lived process keeps nothing)
_RECORDS: list[ClaimRecord] = []


@contextlib.contextmanager
def recording_claims(record: ClaimRecord) -> Iterator[ClaimRecord]:
    """Record into `record` the claims made, and the outputs finished, inside the block."""
    _RECORDS.append(record)
    try:
        yield record
    finally:
        _RECORDS.remove(record)


@dataclass(kw_only=True)
class Claim:
    """What `claim_output` found and holds; the writer's handle on its output."""

    #: the output path as given
    path: Path
    kind: str
    form: str
    #: "new" (nothing there, or an empty directory), "unfinished" (an interrupted run of the same
    #: kind) or "finished" (a complete artefact of the same kind, to be reopened or replaced)
    state: str
    overwrite: bool
    #: companion suffixes (".meta", ".work") written beside a "tsv" output
    companions: tuple[str, ...] = ()
    _marked: bool = field(default=False, repr=False)
    #: the finished result's summary being replaced (state "finished"): it stays on disk, whole,
    #: until `finish()` puts the new files in place
    _old_side: dict | None = field(default=None, repr=False)
    #: target -> temporary of each file written while replacing a finished result
    _staged: dict = field(default_factory=dict, repr=False)
    #: names of the files this claim wrote (or is writing)
    _written: list = field(default_factory=list, repr=False)
    #: name -> size and sha256 of each file this claim has renamed onto its place (a new "tsv"
    #: output): what the "unfinished" sidecar vouches for, so that a file found there after a crash
    #: is known for this run's or for another's (a user's put there since)
    _in_place: dict = field(default_factory=dict, repr=False)
    #: companion directories this claim created (removed again by a failed run that left nothing in them)
    _made_dirs: list = field(default_factory=list, repr=False)

    def companion(self, suffix: str) -> Path:
        if suffix not in self.companions:
            raise ValueError(f"{suffix!r} was not claimed (claimed: {self.companions})")
        return Path(str(self.path) + suffix)

    @property
    def sidecar(self) -> Path:
        return sidecar_of(self.path)

    @property
    def replacing(self) -> bool:
        """A finished "tsv" result is being replaced: new files are staged until `finish()`."""
        return self.form == "tsv" and self.state == "finished"

    def mark_unfinished(self, writing: str | None = None) -> None:
        """For "tsv": before the first write, the sidecar says "unfinished" and names the files this
        run writes (so a crash leaves a recognisable artefact that the next run may redo). A
        finished result being replaced keeps its summary until `finish()`."""
        new_name = writing is not None and writing not in self._written
        if new_name:
            self._written.append(writing)
        if self.form != "tsv" or self.replacing or (self._marked and not new_name):
            return
        self._write_stub()

    def _write_stub(self) -> None:
        atomic_write_manifest(self.sidecar, {"kind": self.kind, "state": "unfinished", "writing": list(self._written),
                                             "in_place": dict(self._in_place)})
        self._marked = True

    def _record_in_place(self, target: Path) -> Callable[[Path], None]:
        """What `atomic_path` runs on the finished temporary of `target` before renaming it: the
        sidecar records its size and sha256 first (was: an "unfinished" sidecar vouched for any
        file at the output, so that a user's file put there after a killed run was replaced)."""
        def record(tmp: Path) -> None:
            self._in_place[target.name] = {"bytes": tmp.stat().st_size, "sha256": sha256_file(tmp)}
            self._write_stub()
        return record

    @contextlib.contextmanager
    def atomic_file(self, suffix: str = "") -> Iterator[Path]:
        """A temporary path renamed onto the output (suffix "": the main file; else a companion).
        While a finished result is replaced, the file is staged and put in place by `finish()`."""
        target = self.path if not suffix else self.companion(suffix)
        self.mark_unfinished(target.name)
        if not self.replacing:
            with atomic_path(target, before_replace=self._record_in_place(target)) as tmp:
                yield tmp
            return
        with self._staging(target, temporary_beside(target)) as tmp:
            yield tmp
            fsync_file(tmp)

    @contextlib.contextmanager
    def _staging(self, target: Path, tmp: Path) -> Iterator[Path]:
        """`tmp` (a file or folder) staged to replace `target` at `finish()`; removed on failure."""
        try:
            yield tmp
        except BaseException:
            remove_path(tmp)
            raise
        if (old := self._staged.pop(target, None)) is not None:  # written twice: the later file wins
            remove_path(old)
        self._staged[target] = tmp

    def discard_staged(self) -> None:
        """Remove the staged files of a replacement that did not finish (the old result stays)."""
        for tmp in self._staged.values():
            remove_path(tmp)
        self._staged.clear()

    @contextlib.contextmanager
    def atomic_dir(self) -> Iterator[Path]:
        """A temporary directory (a dataset folder) that `finish()` renames onto the output; a
        finished result being replaced stays whole until then."""
        self.mark_unfinished(self.path.name)
        tmp = Path(tempfile.mkdtemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp"))
        with self._staging(self.path, tmp) as staged:
            yield staged

    def write_text(self, text: str, suffix: str = "") -> None:
        with self.atomic_file(suffix) as tmp:
            tmp.write_bytes(text.encode("utf-8"))

    def work_dir(self, suffix: str = ".work") -> Path:
        """The companion directory for checkpoints (created, marked as this output's)."""
        d = self.companion(suffix)
        self.mark_unfinished()
        if not d.exists():
            self._made_dirs.append(d)
        d.mkdir(parents=True, exist_ok=True)
        if not (d / MARKER).is_file():
            atomic_write_json(d / MARKER, {"kind": f"{self.kind}-work"})
        return d

    def finish(self, summary: dict[str, Any] | None = None) -> dict[str, Any]:
        """For "tsv": write the sidecar `OUT.json` last: the summary, with `kind`, `state` and
        `output_files` (size and sha256 of the file and of every companion file written).
        Returns what was written."""
        if self.form != "tsv":
            raise ValueError("finish() writes the sidecar of a 'tsv' output")
        files, stale = {}, []
        old_files = (self._old_side or {}).get("output_files") or {}
        for p in [self.path] + [Path(str(self.path) + s) for s in self.companions]:
            src = self._staged.get(p, p)
            if p.name not in self._written:
                if p.name in old_files or (p != self.path and p.is_file()):
                    stale.append(p)  # a file of the earlier result this run did not write again
            elif src.is_dir() and not src.is_symlink():
                files[p.name] = tree_record(src)
            elif src == p and p.is_file() and p.stat().st_size == self._in_place.get(p.name, {}).get("bytes"):
                # hashed as it was put in place (just before the rename)
                files[p.name] = self._in_place[p.name]
            elif src.is_file():
                files[p.name] = {"bytes": src.stat().st_size, "sha256": sha256_file(src)}
        if self.replacing:
            # The old summary, told which files are coming, stays valid while they are moved in.
            atomic_write_manifest(self.sidecar, {**(self._old_side or {}), "replacing": files})
        elif self._staged:  # a new output's folder: recorded before it is put in place, as a file is
            self._in_place.update({t.name: files[t.name] for t in self._staged if t.name in files})
            self._write_stub()
        for target, tmp in self._staged.items():  # a folder is staged even for a new output
            os.chmod(tmp, DIR_MODE if tmp.is_dir() else FILE_MODE)
            _swap_in(tmp, target)
        self._staged.clear()
        for p in stale:
            if os.path.lexists(p):
                remove_path(p)
        body = {**(summary or {}), "kind": self.kind, "format_version": 1, "state": "finished",
                "output_files": files}
        atomic_write_manifest(self.sidecar, body)
        self._marked = True
        for record in _RECORDS:
            record.finished.append(self.path)
        return body


def _swap_in(tmp: Path, target: Path) -> None:
    """Put a staged file or folder in place of `target`: a file replacing a file is one atomic
    rename; where a folder is involved (a dataset folder, or a result written again in another
    format) the two are exchanged (`fileio.swap_in_dir`) and the old one removed."""
    if not os.path.lexists(target) or not (tmp.is_dir() or (target.is_dir() and not target.is_symlink())):
        os.replace(tmp, target)
    else:
        swap_in_dir(tmp, target)


def _check_not_inside_an_artefact(path: Path) -> None:
    """Refuse an output inside an xmine directory artefact (a store, an index, a projection): its
    own files are replaced with it by `--overwrite`, so nothing else may live there."""
    for parent in path.absolute().parents:
        if parent.is_dir():
            found, _ = dir_kind(parent)
            if found is not None and not found.endswith("-work"):  # (a run's work directory holds its stores)
                raise OutputError(f"{path}: lies inside the xmine {kind_label(found)} {parent}; write outputs "
                                  "outside artefact directories (choose another output)")
        elif os.path.lexists(parent):
            raise OutputError(f"{path}: cannot be created: {parent} is not a directory (choose another output)")


@contextlib.contextmanager
def claim_output(path: str | Path, *, kind: str, form: str, inputs: Iterable[str | Path | None] = (),
                 overwrite: bool = False, reopen: bool = False, in_place: bool = False,
                 companions: Iterable[str] = ()) -> Iterator[Claim]:
    """Claim `path` for writing an artefact of `kind` (see the module doc for the rules).

    - `form`: how the artefact is recognised: "dir", "tsv", "json", "png" or "md".
    - `inputs`: every path the command reads (None entries are skipped).
    - `overwrite`: a finished artefact of the same kind may be replaced.
    - `reopen`: a finished artefact of the same kind is handed to the command as it is (embed
      checks whether it is already the requested store); without it, it needs `overwrite`.
    - `in_place`: "dir" built in place (not via `atomic_dir`): the claim creates the directory
      and its marker; the claim's caller writes inside it.
    - `companions`: suffixes of further files/directories written beside a "tsv" output.

    Raises OutputError (nothing touched) when the claim is refused.
    """
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, not {form!r}")
    if str(path).strip() in ("", "."):  # (click turns an empty -o into ".")
        raise OutputError(f"output {str(path)!r}: an empty path or the current directory is not an output; "
                          "name a new file or directory")
    if str(path).strip() == "-":  # (was: a file named '-' and its '-.json' written; xmine writes no artefact to stdout)
        raise OutputError("output '-': xmine writes its outputs to files, with their summary beside them, not to "
                          "standard output; name a file (e.g. -o out.tsv)")
    path = Path(path)
    companions = tuple(companions)
    claimed = [path] + ([sidecar_of(path)] if form == "tsv" else []) + [Path(str(path) + s) for s in companions]
    check_not_input(claimed, inputs)
    _check_not_inside_an_artefact(path)
    made = [parent for parent in reversed(path.parents) if not parent.exists()]  # created here, deepest last
    path.parent.mkdir(parents=True, exist_ok=True)
    ok = created_dir = False
    claim = None
    try:
        with lock_outputs(path, claimed):
            try:
                remove_leftover_temporaries(claimed)
                state = output_state(path, kind, form, companions, in_place=in_place)
                if state == "finished" and not (overwrite or reopen):
                    gone = (f", its files removed since: {sidecar_of(path).name} is left" if removed_by_hand(path)
                            else "")
                    raise OutputError(f"{path}: already exists (an xmine {kind_label(kind)}{gone}); pass --overwrite "
                                      "to replace it or choose another output")
                side = read_json(sidecar_of(path)) if form == "tsv" and state != "new" else None
                claim = Claim(path=path, kind=kind, form=form, state=state, overwrite=overwrite,
                              companions=companions, _old_side=side if state == "finished" else None,
                              # an unfinished run's files in place stay vouched for until replaced (was:
                              # forgotten, so that a second run stopped too left them refused as foreign)
                              _in_place={name: rec for name, rec in ((side or {}).get("in_place") or {}).items()
                                         if state == "unfinished" and os.path.lexists(path.parent / name)})
                for record in _RECORDS:
                    record.claimed.append((path, tuple(Path(str(path) + s) for s in companions)))
                if form == "dir" and in_place:
                    if not path.exists():
                        path.mkdir()
                        created_dir = True
                    if state == "new" and not (path / MANIFEST).exists():
                        atomic_write_json(path / MARKER, {"kind": kind})
                yield claim
                ok = True
                if form != "tsv":  # (a "tsv" output is finished by `Claim.finish`, its summary written last)
                    for record in _RECORDS:
                        record.finished.append(path)
            finally:
                if not ok and created_dir and {p.name for p in path.iterdir()} <= {MARKER, ".lock"}:
                    shutil.rmtree(path, ignore_errors=True)  # nothing but our own scaffolding
                if not ok and claim is not None:
                    claim.discard_staged()
                    for d in claim._made_dirs:  # a run that failed before any checkpoint: nothing to resume
                        if d.is_dir() and all(p.is_dir() or p.name in SCAFFOLDING for p in d.rglob("*")):
                            shutil.rmtree(d, ignore_errors=True)
                if not ok and form == "tsv" and _only_a_stub(path, companions):
                    with contextlib.suppress(FileNotFoundError):
                        sidecar_of(path).unlink()
    finally:
        if not ok:  # parent directories this claim created, if nothing else came to live in them
            for d in reversed(made):
                with contextlib.suppress(OSError):
                    d.rmdir()


def _only_a_stub(path: Path, companions: tuple[str, ...]) -> bool:
    """True when a "tsv" output has only the "unfinished" sidecar a failed run wrote (removed then)."""
    side = read_json(sidecar_of(path)) if sidecar_of(path).is_file() else None
    if not side or side.get("state") != "unfinished":
        return False
    return not os.path.lexists(path) and not any(os.path.lexists(str(path) + s) for s in companions)


__all__ = ["Claim", "ClaimRecord", "SCAFFOLDING", "claim_output", "recording_claims"]

