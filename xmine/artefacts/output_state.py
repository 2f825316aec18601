"""What is at an output path: nothing, an xmine artefact of some kind (finished or not), or
something xmine must not touch. `xmine.artefacts.outputs.claim_output` asks `output_state` before writing.

How an existing path is recognised as xmine's (`form`):

- `"dir"` (store, index, projection, export): its `manifest.json` names the kind. A directory
  being built in place gets the marker `.xmine-output.json` the moment the claim creates it, so
  an unfinished one is recognised too.
- `"tsv"` (mined pairs, search hits, langid): the sidecar `OUT.json` names the kind and records
  the size and sha256 of the file (and of its companions), and carries a checksum of its own
  content, as a manifest does. A file that no longer matches its sidecar, or a sidecar that no
  longer matches its checksum, was edited by someone: it is refused.
- `"json"` (benchmark results): the file's own top-level `kind`.
- `"png"` (plots): a PNG text chunk `xmine-kind` (`png_metadata(kind)` gives it to matplotlib).
- `"md"` (the benchmark report): its first line is `md_header(kind)`'s.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct
from pathlib import Path
from typing import Iterable

from xmine.errors import ConfigError, InputError, OutputError
from xmine.artefacts.fileio import (MANIFEST, MARKER, SELF_CHECKSUM, intact, kind_label, missing, read_json,
                                    sha256_file)

FORMS = ("dir", "tsv", "json", "png", "md")
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_KEY = "xmine-kind"


def png_metadata(kind: str) -> dict[str, str]:
    """Metadata for matplotlib's `savefig(metadata=...)` that marks a PNG as xmine's `kind`."""
    return {_PNG_KEY: kind}


def md_header(kind: str) -> str:
    """The first line of a markdown artefact of `kind` (an HTML comment, invisible when rendered)."""
    return f"<!-- xmine-kind: {kind} -->"


# ------------------------------------------------------------------------------ recognition


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
    m = read_json(path / MANIFEST)
    if m is not None and isinstance(m.get("kind"), str):
        return m["kind"], True
    marker = read_json(path / MARKER)
    if marker is not None and isinstance(marker.get("kind"), str):
        return marker["kind"], False
    return None, False


#: what identifies a directory output's content in its record (`tree_record`); "files" names each
#: file's own sha256, so that `verify` can say which one changed
TREE_KEYS = ("bytes", "sha256", "tree")


def tree_record(path: Path) -> dict:
    """Size and sha256 of a directory output (a dataset folder): over its files' names and sha256;
    and each file's sha256 by its path in the folder ("files")."""
    h, size, files = hashlib.sha256(), 0, {}
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        name, digest = f.relative_to(path).as_posix(), sha256_file(f)
        h.update(f"{name}\0{digest}\n".encode())
        size, files[name] = size + f.stat().st_size, digest
    return {"bytes": size, "sha256": h.hexdigest(), "tree": len(files), "files": files}


def tree_changes(path: Path, rec: dict) -> list[str]:
    """The files of directory output `path` that differ from its record (`tree_record`'s), each as
    "NAME (changed)", "(missing)" or "(not recorded)"; [] where the record names no files (written
    by an older xmine) or none differs."""
    recorded = rec.get("files")
    if not isinstance(recorded, dict) or not path.is_dir():
        return []
    now = tree_record(path)["files"]
    return ([f"{name} (changed)" for name in sorted(recorded) if name in now and now[name] != recorded[name]]
            + [f"{name} (missing)" for name in sorted(recorded) if name not in now]
            + [f"{name} (not recorded)" for name in sorted(now) if name not in recorded])


def _matches(p: Path, rec: dict | None) -> bool:
    if rec is None:
        return False
    if rec.get("tree") is not None:
        return p.is_dir() and not p.is_symlink() and {k: v for k, v in tree_record(p).items() if k in TREE_KEYS} == {
            k: rec.get(k) for k in TREE_KEYS}
    return p.is_file() and p.stat().st_size == rec.get("bytes") and sha256_file(p) == rec.get("sha256")


def own_output_name(base: Path, name: object) -> bool:
    """Whether `name`, read from the sidecar of the output `base`, is a name the output's writer
    gives: the output's own file name, or it with a companion suffix (`OUT.meta`, `OUT.src`), in
    the same folder."""
    return (isinstance(name, str) and "/" not in name and "\\" not in name
            and (name == base.name or name.startswith(base.name + ".")))


def removed_by_hand(path: Path) -> bool:
    """Whether every file the summary of the text output `path` records is gone, its summary left."""
    side = read_json(sidecar_of(path)) if sidecar_of(path).is_file() else None
    names = [name for name in ((side or {}).get("output_files") or {}) if own_output_name(path, name)]
    return bool(names) and not any(os.path.lexists(path.parent / name) for name in names)


def changed_files(side: dict, base: Path) -> list[str]:
    """Files (and directory outputs) a finished sidecar records whose size or sha256 no longer
    match. While a replacement is being put in place (`replacing`: the new files' records), a file
    may match either record, and one the new result does not have, or a folder being swapped, may
    be gone already."""
    old, new = side.get("output_files") or {}, side.get("replacing")
    bad = []
    for name in dict.fromkeys([*old, *(new or {})]):
        if not own_output_name(base, name):  # never looked at: a sidecar cannot point outside its output
            bad.append(name)
            continue
        p = base.parent / name
        if _matches(p, old.get(name)):
            continue
        if new is not None and (_matches(p, new.get(name)) or (
                (name not in new or new[name].get("tree") is not None) and not os.path.lexists(p))):
            continue
        bad.append(name)
    return bad


def _recorded_tree(path: Path) -> bool:
    """True when `path` is a directory its sidecar records as this output (a dataset folder): as a
    finished output's file, or as one an unfinished run put in place (checked then by its record)."""
    side = (read_json(sidecar_of(path)) if sidecar_of(path).is_file() else None) or {}
    records = side.get("output_files") if side.get("state") == "finished" else side.get("in_place")
    rec = (records if isinstance(records, dict) else {}).get(path.name)
    return path.is_dir() and not path.is_symlink() and isinstance(rec, dict) and rec.get("tree") is not None


def same_file(a: Path, b: Path) -> bool:
    """True when `a` and `b` both exist and are one file (hard links, bind mounts)."""
    try:
        sa, sb = a.stat(), b.stat()
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def check_not_input(outputs: Iterable[Path], inputs: Iterable[str | Path | None]) -> None:
    """Refuse an output that is, contains or lies inside an input (OutputError)."""
    ins = [Path(i) for i in inputs if i is not None]
    for given in ins:  # (a loop was a RuntimeError traceback from resolve(), in and out alike)
        if (why := missing(given)) is not None and "loops" in why:
            raise InputError(given, why)
    for out in outputs:
        if (why := missing(out)) is not None and "loops" in why:
            raise OutputError(f"{out}: exists and is {why}; refusing to replace it (choose another output)")
        o = out.resolve()
        for given in ins:
            i = given.resolve()
            if o == i or same_file(out, given):
                raise OutputError(f"{out}: is an input of this command ({given}); choose another output")
            if i.is_relative_to(o):
                raise OutputError(f"{out}: contains the input {given}; choose another output")
            if given.is_dir() and o.is_relative_to(i):
                raise OutputError(f"{out}: lies inside the input {given}; choose another output")


#: endings that name a format of rows (or a compression): an output so named that a command does not
#: write that format is refused, rather than plain text written under the name (mine, score, search)
FORMAT_ENDINGS = (".tsv", ".csv", ".json", ".jsonl", ".ndjson", ".parquet", ".pq", ".tmx", ".arrow", ".feather",
                  ".gz", ".xz", ".bz2", ".zst", ".zstd")


def names_another_format(out: str | Path, named: str | None) -> bool:
    """Whether `out`, whose name says no format the command writes (`named` None), is named for a
    format or compression it does not write (`FORMAT_ENDINGS`, before a .gz): refused by mine, score
    and search rather than plain text written under the name. An existing directory is a dataset,
    whatever its name."""
    name = Path(out).name.lower()
    return named is None and not Path(out).is_dir() and name.removesuffix(".gz").endswith(FORMAT_ENDINGS)


def check_named_format(out: str | Path, fmt: str, named: str | None) -> None:
    """Refuse a --format `fmt` other than the format `named` by the output's name (was: JSON Lines
    written into out.parquet, or into hits.tsv, without a word): `mine`'s, `score`'s and `search`'s."""
    if named is not None and named != fmt:
        raise ConfigError(f"{out}: its name says {named}, but --format {fmt} was given; name the output for "
                          "the format it holds, or leave --format out")


def output_state(path: Path, kind: str, form: str, companions: tuple[str, ...],
              *, in_place: bool = False) -> str:
    """"new", "unfinished" or "finished"; OutputError for anything xmine must not touch.

    A symbolic link to a directory is followed for a directory built in place (a store on a
    bigger disk); one that would be replaced as a whole is refused."""
    exists = os.path.lexists(path)
    if form == "dir":
        if not exists:
            return "new"
        if (path.is_symlink() and not in_place) or not path.is_dir():
            what = "a symbolic link" if path.is_symlink() else "not a directory"
            raise OutputError(f"{path}: exists and is {what}; refusing to replace it (choose another output)")
        if not any(path.iterdir()):
            return "new"
        found, finished = dir_kind(path)
        if found is None:
            raise OutputError(f"{path}: exists and is not an xmine {kind_label(kind)}; refusing to write into it "
                              "(choose a new or empty directory)")
        if found != kind:
            raise OutputError(f"{path}: is an xmine {kind_label(found)}, not an xmine {kind_label(kind)}; refusing to replace it "
                              "(choose another output)")
        return "finished" if finished else "unfinished"

    if exists and (path.is_dir() or path.is_symlink()) and not (form == "tsv" and _recorded_tree(path)):
        # (an empty one: was "choose another output file" to a user who made a dataset output's folder first)
        if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
            raise OutputError(f"{path}: exists, an empty directory; refusing to replace it (xmine creates an output, "
                              "a dataset folder too: remove it, or name one that does not exist)")
        raise OutputError(f"{path}: exists and is a {'directory' if path.is_dir() else 'symbolic link'}; "
                          "refusing to replace it (choose another output file)")
    if form == "tsv":
        side_path = sidecar_of(path)
        side = read_json(side_path) if side_path.is_file() else None
        extra = [Path(str(path) + s) for s in companions if os.path.lexists(str(path) + s)]
        if side is None or side.get("kind") != kind:
            if os.path.lexists(side_path):
                # the sealed summary of another kind of output: named as that output (a JSON file of the
                # user's that says a kind is not xmine's: was "is an xmine mine (says out.tsv.json)")
                if side and side.get("kind") and SELF_CHECKSUM in side and intact(side):
                    raise OutputError(f"{path}: is an xmine {kind_label(side['kind'])} (says {side_path.name}), not an "
                                      f"xmine {kind_label(kind)}; refusing to replace it (choose another output)")
                raise OutputError(f"{side_path}: exists and is not an xmine summary; refusing to replace it "
                                  "(choose another output)")
            if exists:
                raise OutputError(f"{path}: exists and is not an xmine {kind_label(kind)} (no {side_path.name} beside it); "
                                  "refusing to replace it (choose another output)")
            for e in extra:
                if e.is_dir() and (read_json(e / MARKER) or {}).get("kind") == f"{kind}-work":
                    continue
                raise OutputError(f"{e}: exists and is not part of an xmine {kind_label(kind)}; refusing to replace it "
                                  "(choose another output)")
            return "unfinished" if extra else "new"
        if not intact(side):  # (a summary edited since it was written)
            raise OutputError(f"{side_path}: content differs from the checksum it was written with: edited or damaged "
                              f"since xmine wrote it; refusing to replace {path.name} (move both away first)")
        foreign = _foreign_companion(path, kind, companions, side)
        if foreign is not None:
            raise OutputError(f"{foreign}: exists and is not part of the xmine {kind_label(kind)} {path.name} "
                              f"(its {side_path.name} does not record it); refusing to replace it "
                              "(move it away or choose another output)")
        if side.get("state") != "finished":
            if (foreign := _not_put_in_place(path, companions, side)) is not None:
                raise OutputError(f"{foreign}: exists, but the run of xmine that {side_path.name} is the summary of "
                                  f"stopped before it finished, and did not write this file; refusing to replace it "
                                  "(move it away, or choose another output)")
            return "unfinished"
        # A file of it deleted by hand is no user's data: what is left is xmine's own (its summary),
        # replaced with --overwrite; one edited since is the user's, and refused.
        # (a name not of this output is never looked at: it stays refused)
        changed = [name for name in changed_files(side, path)
                   if not own_output_name(path, name) or os.path.lexists(path.parent / name)]
        if changed:
            raise OutputError(f"{path}: {', '.join(changed)} changed since xmine wrote it (size or sha256 "
                              f"differs from {side_path.name}); refusing to replace it (move it away first)")
        return "finished"
    if not exists:
        return "new"
    if form == "json":
        found = (read_json(path) or {}).get("kind")
    elif form == "png":
        found = _png_kind(path)
    elif form == "md":
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                first = f.readline().rstrip("\n")
        except OSError:
            first = ""
        found = kind if first == md_header(kind) else None
    else:
        raise ValueError(f"form must be one of {FORMS}, not {form!r}")
    if found != kind:
        what = f"an xmine {kind_label(found)}" if found else f"not an xmine {kind_label(kind)}"
        raise OutputError(f"{path}: exists and is {what}; refusing to replace it (choose another output)")
    return "finished"


def _foreign_companion(path: Path, kind: str, companions: tuple[str, ...], side: dict) -> Path | None:
    """A companion beside `path` that its summary does not account for: a file that is neither a
    recorded output file nor one an unfinished run was writing, or a directory without this
    output's work marker."""
    own = (set(side.get("output_files") or {}) | set(side.get("replacing") or {}) | set(side.get("writing") or [])
           | set(side.get("in_place") or {}))  # (an unfinished run's: their content is checked by `_not_put_in_place`)
    for s in companions:
        p = Path(str(path) + s)
        if not os.path.lexists(p):
            continue
        if p.is_dir() and not p.is_symlink():
            if (read_json(p / MARKER) or {}).get("kind") != f"{kind}-work":
                return p
        elif p.name not in own:
            return p
    return None


def _not_put_in_place(path: Path, companions: tuple[str, ...], side: dict) -> Path | None:
    """The output file or companion file at `path` that the unfinished run whose sidecar is `side`
    did not put there: one its sidecar does not record as renamed into place, with that size and
    sha256 (`Claim._record_in_place`; a sidecar of an older xmine records none). A user's file put
    there after the run was killed is such a file. The output as a folder (a dataset) is judged by
    its record alike; companion folders by their marker (`_foreign_companion`)."""
    done = side.get("in_place") if isinstance(side.get("in_place"), dict) else {}
    for p in (path, *(Path(str(path) + s) for s in companions)):
        companion_dir = p != path and p.is_dir() and not p.is_symlink()
        if os.path.lexists(p) and not companion_dir and not _matches(p, done.get(p.name)):
            return p
    return None


def being_written(path: Path) -> bool:
    """Whether an xmine process holds the writer's lock of `path` now (`.NAME.lock` beside it:
    `xmine.artefacts.outputs`), so what is there is a run in progress, not one that stopped. The
    lock is only tried, never taken: opened read-only, not created."""
    try:
        fd = os.open(path.parent / f".{path.name}.lock", os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # (closing releases a shared lock taken)
    return False


__all__ = ["FORMAT_ENDINGS", "FORMS", "TREE_KEYS", "being_written", "changed_files", "check_named_format",
           "check_not_input", "dir_kind", "md_header", "names_another_format", "own_output_name", "output_state",
           "png_metadata", "same_file", "sidecar_of", "tree_changes", "tree_record"]
