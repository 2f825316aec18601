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
   run's) is continued or redone without `--overwrite`: it holds nothing finished.
3. **Atomic.** Files go through `atomic_path`, directories through `atomic_dir`; replacing an
   artefact removes only that artefact's own files.
4. **One writer.** An exclusive `fcntl` lock on `.NAME.lock` beside the output (removed when
   the claim ends); a second writer of the same output fails at once.

How an existing path is recognised as xmine's (`form`):

- `"dir"` (store, index, projection, export): its `manifest.json` names the kind. A directory
  being built in place (`in_place=True`) gets the marker `.xmine-output.json` the moment the
  claim creates it, so an unfinished one is recognised too; `legacy(path)` may recognise
  unfinished artefacts from before the marker.
- `"tsv"` (mined pairs, search hits, langid): the sidecar `OUT.json` names the kind and records
  the size and sha256 of the file (and of its companions). A file that no longer matches its
  sidecar was edited by someone: it is refused.
- `"json"` (benchmark results): the file's own top-level `kind`.
- `"png"` (plots): a PNG text chunk `xmine-kind` (`png_metadata(kind)` gives it to matplotlib).
- `"md"` (the benchmark report): its first line is `md_header(kind)`'s, or the legacy title.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from xmine.errors import OutputError
from xmine.fileio import DIR_MODE, FILE_MODE, MANIFEST, atomic_path, atomic_write_json, sha256_file, swap_in_dir

#: Written into a directory the claim creates for in-place building (stores, projections).
MARKER = ".xmine-output.json"
FORMS = ("dir", "tsv", "json", "png", "md")
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_KEY = "xmine-kind"
# Headers of markdown artefacts written before md_header existed.
_LEGACY_MD = {"benchmark-report": "# xmine benchmark results"}


#: files a run writes into its work directory before any result: the marker, and the key.json that
#: ties checkpoints to their inputs (mining/knn.py, approximate.py, ray_knn.py). A failed run that
#: left only these has nothing to resume.
SCAFFOLDING = frozenset({MARKER, "key.json"})


def _label(kind: str) -> str:
    """How a kind reads in a message: "embedding-store" -> "embedding store"."""
    return str(kind).replace("-", " ")


def png_metadata(kind: str) -> dict[str, str]:
    """Metadata for matplotlib's `savefig(metadata=...)` that marks a PNG as xmine's `kind`."""
    return {_PNG_KEY: kind}


def md_header(kind: str) -> str:
    """The first line of a markdown artefact of `kind` (an HTML comment, invisible when rendered)."""
    return f"<!-- xmine-kind: {kind} -->"


# ------------------------------------------------------------------------------ recognition


def _read_json(path: Path) -> dict | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _png_kind(path: Path) -> str | None:
    """The `xmine-kind` text chunk of a PNG, if any (reads chunk headers, not the image)."""
    try:
        with open(path, "rb") as f:
            if f.read(8) != _PNG_SIGNATURE:
                return None
            while True:
                head = f.read(8)
                if len(head) < 8:
                    return None
                length, ctype = struct.unpack(">I4s", head)
                if ctype == b"tEXt" and length < 4096:
                    key, _, value = f.read(length).partition(b"\x00")
                    if key.decode("latin-1") == _PNG_KEY:
                        return value.decode("latin-1")
                    f.seek(4, os.SEEK_CUR)
                elif ctype == b"IEND":
                    return None
                else:
                    f.seek(length + 4, os.SEEK_CUR)
    except OSError:
        return None


def sidecar_of(path: str | Path) -> Path:
    """`OUT.json`: the summary that marks a TSV output as xmine's."""
    return Path(str(path) + ".json")


def dir_kind(path: Path) -> tuple[str | None, bool]:
    """(kind, finished) of an xmine directory artefact: from its manifest, else its marker."""
    m = _read_json(path / MANIFEST)
    if m is not None and isinstance(m.get("kind"), str):
        return m["kind"], True
    marker = _read_json(path / MARKER)
    if marker is not None and isinstance(marker.get("kind"), str):
        return marker["kind"], False
    return None, False


def tree_record(path: Path) -> dict:
    """Size and sha256 of a directory output (a dataset folder): over its files' names and sha256."""
    h, size, n = hashlib.sha256(), 0, 0
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(path).as_posix()}\0{sha256_file(f)}\n".encode())
        size, n = size + f.stat().st_size, n + 1
    return {"bytes": size, "sha256": h.hexdigest(), "tree": n}


def _matches(p: Path, rec: dict | None) -> bool:
    if rec is None:
        return False
    if rec.get("tree") is not None:
        return p.is_dir() and not p.is_symlink() and tree_record(p) == {k: rec.get(k) for k in ("bytes", "sha256", "tree")}
    return p.is_file() and p.stat().st_size == rec.get("bytes") and sha256_file(p) == rec.get("sha256")


def _changed_files(side: dict, base: Path) -> list[str]:
    """Files (and directory outputs) a finished sidecar records whose size or sha256 no longer
    match. While a replacement is being put in place (`replacing`: the new files' records), a file
    may match either record, and one the new result does not have, or a folder being swapped, may
    be gone already."""
    old, new = side.get("output_files") or {}, side.get("replacing")
    bad = []
    for name in dict.fromkeys([*old, *(new or {})]):
        p = base.parent / name
        if _matches(p, old.get(name)):
            continue
        if new is not None and (_matches(p, new.get(name)) or (
                (name not in new or new[name].get("tree") is not None) and not os.path.lexists(p))):
            continue
        bad.append(name)
    return bad


def _recorded_tree(path: Path) -> bool:
    """True when `path` is a directory its sidecar records as this output (a dataset folder)."""
    side = _read_json(sidecar_of(path)) if sidecar_of(path).is_file() else None
    rec = ((side or {}).get("output_files") or {}).get(path.name) or {}
    return path.is_dir() and not path.is_symlink() and rec.get("tree") is not None


# ------------------------------------------------------------------------------ the claim


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
        atomic_write_json(self.sidecar, {"kind": self.kind, "state": "unfinished", "writing": list(self._written)})
        self._marked = True

    @contextlib.contextmanager
    def atomic_file(self, suffix: str = "") -> Iterator[Path]:
        """A temporary path renamed onto the output (suffix "": the main file; else a companion).
        While a finished result is replaced, the file is staged and put in place by `finish()`."""
        target = self.path if not suffix else self.companion(suffix)
        self.mark_unfinished(target.name)
        if not self.replacing:
            with atomic_path(target) as tmp:
                yield tmp
            return
        tmp = _staging_path(target)
        try:
            yield tmp
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        old = self._staged.pop(target, None)
        if old is not None:
            old.unlink(missing_ok=True)
        self._staged[target] = tmp

    def discard_staged(self) -> None:
        """Remove the staged files of a replacement that did not finish (the old result stays)."""
        for tmp in self._staged.values():
            _remove(tmp)
        self._staged.clear()

    @contextlib.contextmanager
    def atomic_dir(self) -> Iterator[Path]:
        """A temporary directory (a dataset folder) that `finish()` renames onto the output; a
        finished result being replaced stays whole until then."""
        import tempfile

        self.mark_unfinished(self.path.name)
        tmp = Path(tempfile.mkdtemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp"))
        try:
            yield tmp
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        old = self._staged.pop(self.path, None)
        if old is not None:
            _remove(old)
        self._staged[self.path] = tmp

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
            elif src.is_file():
                files[p.name] = {"bytes": src.stat().st_size, "sha256": sha256_file(src)}
        if self.replacing:
            # The old summary, told which files are coming, stays valid while they are moved in.
            atomic_write_json(self.sidecar, {**(self._old_side or {}), "replacing": files})
        for target, tmp in self._staged.items():  # a folder is staged even for a new output
            os.chmod(tmp, DIR_MODE if tmp.is_dir() else FILE_MODE)
            _swap_in(tmp, target)
        self._staged.clear()
        for p in stale:
            if os.path.lexists(p):
                _remove(p)
        body = {**(summary or {}), "kind": self.kind, "format_version": 1, "state": "finished",
                "output_files": files}
        atomic_write_json(self.sidecar, body)
        self._marked = True
        return body


def _remove(path: Path) -> None:
    """Remove one of this claim's own files or folders (a staged temporary, a replaced output)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _swap_in(tmp: Path, target: Path) -> None:
    """Put a staged file or folder in place of `target`: a file replacing a file is one atomic
    rename; where a folder is involved (a dataset folder, or a result written again in another
    format) the two are exchanged (`fileio.swap_in_dir`) and the old one removed."""
    if not os.path.lexists(target) or not (tmp.is_dir() or (target.is_dir() and not target.is_symlink())):
        os.replace(tmp, target)
    else:
        swap_in_dir(tmp, target)


def _staging_path(target: Path) -> Path:
    """A new hidden temporary beside `target`, named as `atomic_path` names its temporaries."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}.", suffix=f".tmp{target.suffix}")
    os.close(fd)
    return Path(tmp)


def _same_file(a: Path, b: Path) -> bool:
    try:
        sa, sb = a.stat(), b.stat()
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def check_not_input(outputs: Iterable[Path], inputs: Iterable[str | Path | None]) -> None:
    """Refuse an output that is, contains or lies inside an input (OutputError)."""
    ins = [Path(i) for i in inputs if i is not None]
    for out in outputs:
        o = out.resolve()
        for given in ins:
            i = given.resolve()
            if o == i or _same_file(out, given):
                raise OutputError(f"{out}: is an input of this command ({given}); choose another output")
            if i.is_relative_to(o):
                raise OutputError(f"{out}: contains the input {given}; choose another output")
            if given.is_dir() and o.is_relative_to(i):
                raise OutputError(f"{out}: lies inside the input {given}; choose another output")


def output_state(path: Path, kind: str, form: str, companions: tuple[str, ...],
              legacy: Callable[[Path], bool] | None, *, in_place: bool = False) -> str:
    """"new", "unfinished" or "finished"; OutputError for anything xmine must not touch.

    A symbolic link to a directory is followed for a directory built in place (a store on a
    bigger disk); one that would be replaced as a whole is refused."""
    exists = os.path.lexists(path)
    if form == "dir":
        if not exists:
            return "new"
        if (path.is_symlink() and not in_place) or not path.is_dir():
            raise OutputError(f"{path}: exists and is not a directory; refusing to replace it "
                              "(choose another output)")
        if not any(path.iterdir()):
            return "new"
        found, finished = dir_kind(path)
        if found is None and legacy is not None and legacy(path):
            found, finished = kind, False
        if found is None:
            raise OutputError(f"{path}: exists and is not an xmine {_label(kind)}; refusing to write into it "
                              "(choose a new or empty directory)")
        if found != kind:
            raise OutputError(f"{path}: is an xmine {_label(found)}, not an xmine {_label(kind)}; refusing to replace it "
                              "(choose another output)")
        return "finished" if finished else "unfinished"

    if exists and (path.is_dir() or path.is_symlink()) and not (form == "tsv" and _recorded_tree(path)):
        raise OutputError(f"{path}: exists and is a {'directory' if path.is_dir() else 'symbolic link'}; "
                          "refusing to replace it (choose another output file)")
    if form == "tsv":
        side_path = sidecar_of(path)
        side = _read_json(side_path) if side_path.is_file() else None
        extra = [Path(str(path) + s) for s in companions if os.path.lexists(str(path) + s)]
        if side is not None and "kind" not in side and legacy is not None and legacy(path):
            return "finished"  # written before summaries carried a kind
        if side is None or side.get("kind") != kind:
            if os.path.lexists(side_path):
                what = f"an xmine {_label(side['kind'])}" if side and side.get("kind") else "not an xmine summary"
                raise OutputError(f"{side_path}: exists and is {what}; refusing to replace it "
                                  "(choose another output)")
            if exists:
                raise OutputError(f"{path}: exists and is not an xmine {_label(kind)} (no {side_path.name} beside it); "
                                  "refusing to replace it (choose another output)")
            for e in extra:
                if e.is_dir() and (_read_json(e / MARKER) or {}).get("kind") == f"{kind}-work":
                    continue
                raise OutputError(f"{e}: exists and is not part of an xmine {_label(kind)}; refusing to replace it "
                                  "(choose another output)")
            return "unfinished" if extra else "new"
        foreign = _foreign_companion(path, kind, companions, side)
        if foreign is not None:
            raise OutputError(f"{foreign}: exists and is not part of the xmine {_label(kind)} {path.name} "
                              f"(its {side_path.name} does not record it); refusing to replace it "
                              "(move it away or choose another output)")
        if side.get("state") != "finished":
            return "unfinished"
        changed = _changed_files(side, path)
        if changed:
            raise OutputError(f"{path}: {', '.join(changed)} changed since xmine wrote it (size or sha256 "
                              f"differs from {side_path.name}); refusing to replace it (move it away first)")
        return "finished"
    if not exists:
        return "new"
    if form == "json":
        found = (_read_json(path) or {}).get("kind")
    elif form == "png":
        found = _png_kind(path)
    elif form == "md":
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                first = f.readline().rstrip("\n")
        except OSError:
            first = ""
        found = kind if first in (md_header(kind), _LEGACY_MD.get(kind)) else None
    else:
        raise ValueError(f"form must be one of {FORMS}, not {form!r}")
    if found is None and legacy is not None and legacy(path):
        found = kind
    if found != kind:
        what = f"an xmine {_label(found)}" if found else f"not an xmine {_label(kind)}"
        raise OutputError(f"{path}: exists and is {what}; refusing to replace it (choose another output)")
    return "finished"


#: The content of a lock file xmine created: only such a file is ever removed again.
_LOCK_TAG = b"xmine output lock\n"


def _open_lock(lock: Path) -> tuple[int, bool]:
    """(fd, created): the lock file opened, created with xmine's tag when it did not exist. An
    existing file of that name is only locked (read-only), never written."""
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        except FileExistsError:
            try:
                return os.open(lock, os.O_RDONLY | os.O_NOFOLLOW), False
            except FileNotFoundError:
                continue  # removed by its holder in between: create it
            except OSError:
                raise OutputError(f"{lock}: exists and cannot be used as xmine's lock (not a plain file); "
                                  "move it away or choose another output") from None
        try:
            os.write(fd, _LOCK_TAG)
        except OSError as e:  # a full disk: name the output, leave nothing behind
            os.close(fd)
            os.unlink(lock)
            raise OSError(e.errno, e.strerror, str(lock)) from None
        return fd, True


def _ours(fd: int) -> bool:
    try:
        return os.pread(fd, len(_LOCK_TAG) + 1, 0) == _LOCK_TAG
    except OSError:
        return False


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """Exclusive, non-blocking lock on `.NAME.lock` beside `path`. The file is removed on release
    only when it is xmine's (created by xmine, holding its tag): a user's file of that name is
    locked as it is and left in place."""
    lock = path.parent / f".{path.name}.lock"
    while True:
        fd, created = _open_lock(lock)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputError(f"{path}: another xmine process is writing this output right now "
                              f"(lock {lock.name}); wait for it to finish or choose another output") from None
        # The previous holder removes the lock file when done: make sure we locked the live one.
        try:
            st, live = os.fstat(fd), os.stat(lock, follow_symlinks=False)
            if (st.st_dev, st.st_ino) == (live.st_dev, live.st_ino):
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        yield
    finally:
        if created or _ours(fd):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock)
        os.close(fd)


def _check_not_inside_an_artefact(path: Path) -> None:
    """Refuse an output inside an xmine directory artefact (a store, an index, a projection): its
    own files are replaced with it by `--overwrite`, so nothing else may live there."""
    for parent in path.absolute().parents:
        if parent.is_dir():
            found, _ = dir_kind(parent)
            if found is not None and not found.endswith("-work"):  # (a run's work directory holds its stores)
                raise OutputError(f"{path}: lies inside the xmine {_label(found)} {parent}; write outputs "
                                  "outside artefact directories (choose another output)")
        elif os.path.lexists(parent):
            raise OutputError(f"{path}: cannot be created: {parent} is not a directory (choose another output)")


def _make_parents(path: Path) -> list[Path]:
    """Create missing parent directories; return those created (deepest last)."""
    made = []
    for parent in reversed(path.parents):
        if not parent.exists():
            made.append(parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    return made


@contextlib.contextmanager
def claim_output(
    path: str | Path,
    *,
    kind: str,
    form: str,
    inputs: Iterable[str | Path | None] = (),
    overwrite: bool = False,
    reopen: bool = False,
    in_place: bool = False,
    companions: Iterable[str] = (),
    legacy: Callable[[Path], bool] | None = None,
) -> Iterator[Claim]:
    """Claim `path` for writing an artefact of `kind` (see the module doc for the rules).

    - `form`: how the artefact is recognised: "dir", "tsv", "json", "png" or "md".
    - `inputs`: every path the command reads (None entries are skipped).
    - `overwrite`: a finished artefact of the same kind may be replaced.
    - `reopen`: a finished artefact of the same kind is handed to the command as it is (embed
      checks whether it is already the requested store); without it, it needs `overwrite`.
    - `in_place`: "dir" built in place (not via `atomic_dir`): the claim creates the directory
      and its marker; the claim's caller writes inside it.
    - `companions`: suffixes of further files/directories written beside a "tsv" output.
    - `legacy(path)`: True for an artefact of `kind` written before its marker existed (a
      "dir" counts as unfinished; a file as finished).

    Raises OutputError (nothing touched) when the claim is refused.
    """
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, not {form!r}")
    if str(path).strip() in ("", "."):  # (click turns an empty -o into ".")
        raise OutputError(f"output {str(path)!r}: an empty path or the current directory is not an output; "
                          "name a new file or directory")
    path = Path(path)
    companions = tuple(companions)
    claimed = [path] + ([sidecar_of(path)] if form == "tsv" else []) + [Path(str(path) + s) for s in companions]
    check_not_input(claimed, inputs)
    _check_not_inside_an_artefact(path)
    made = _make_parents(path)
    try:
        lock = _lock(path)
        lock.__enter__()
    except BaseException:
        for d in reversed(made):
            with contextlib.suppress(OSError):
                d.rmdir()
        raise
    ok = False
    created_dir = False
    claim = None
    try:
        state = output_state(path, kind, form, companions, legacy, in_place=in_place)
        if state == "finished" and not (overwrite or reopen):
            raise OutputError(f"{path}: already exists (an xmine {_label(kind)}); pass --overwrite to replace it "
                              "or choose another output")
        claim = Claim(path=path, kind=kind, form=form, state=state, overwrite=overwrite, companions=companions,
                      _old_side=_read_json(sidecar_of(path)) if form == "tsv" and state == "finished" else None)
        if form == "dir" and in_place:
            if not path.exists():
                path.mkdir()
                created_dir = True
            if state == "new" and not (path / MANIFEST).exists():
                atomic_write_json(path / MARKER, {"kind": kind})
        yield claim
        ok = True
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
        lock.__exit__(None, None, None)
        if not ok:  # parent directories this claim created, if nothing else came to live in them
            for d in reversed(made):
                with contextlib.suppress(OSError):
                    d.rmdir()


def _foreign_companion(path: Path, kind: str, companions: tuple[str, ...], side: dict) -> Path | None:
    """A companion beside `path` that its summary does not account for: a file that is neither a
    recorded output file nor one an unfinished run was writing, or a directory without this
    output's work marker."""
    own = set(side.get("output_files") or {}) | set(side.get("replacing") or {}) | set(side.get("writing") or [])
    for s in companions:
        p = Path(str(path) + s)
        if not os.path.lexists(p):
            continue
        if p.is_dir() and not p.is_symlink():
            if (_read_json(p / MARKER) or {}).get("kind") != f"{kind}-work":
                return p
        elif p.name not in own:
            return p
    return None


def _only_a_stub(path: Path, companions: tuple[str, ...]) -> bool:
    """True when a "tsv" output has only the "unfinished" sidecar a failed run wrote (removed then)."""
    side = _read_json(sidecar_of(path)) if sidecar_of(path).is_file() else None
    if not side or side.get("state") != "unfinished":
        return False
    return not os.path.lexists(path) and not any(os.path.lexists(str(path) + s) for s in companions)


def verify_output_file(path: str | Path) -> tuple[str, int, str]:
    """Check a "tsv" output against its OUT.json summary: (kind, bytes, detail) or ArtefactError."""
    from xmine.errors import ArtefactError

    path = Path(path)
    side = _read_json(sidecar_of(path))
    if side is None or "kind" not in side:
        raise ArtefactError(f"{sidecar_of(path)}: not an xmine summary (unreadable, or no kind)")
    if side.get("state") != "finished":
        raise ArtefactError(f"{path}: unfinished (its run was interrupted); run the same command again")
    if "replacing" in side:
        raise ArtefactError(f"{path}: its replacement was interrupted while the new files were moved in; "
                            "run the same command again with --overwrite")
    files = side.get("output_files") or {}
    if path.name not in files and not any(name.startswith(path.name + ".") for name in files):
        raise ArtefactError(f"{sidecar_of(path)}: records no sha256 of {path.name} (written by an older xmine)")
    changed = _changed_files(side, path)
    if changed:
        raise ArtefactError(f"{path.parent / changed[0]}: size or sha256 differs from {sidecar_of(path).name}: "
                            "changed or damaged since xmine wrote it")
    return side["kind"], sum(int(r["bytes"]) for r in files.values()), f"{len(files)} file(s) match their sha256"


__all__ = ["Claim", "MARKER", "check_not_input", "claim_output", "dir_kind", "md_header", "output_state",
           "png_metadata", "sidecar_of", "verify_output_file"]
