"""Atomic writes, sha256 hashing and manifests: the files layer every artefact stands on.

Every artefact directory xmine writes (embedding store, projection, index, `bench mining` sets)
holds a `manifest.json` with `kind` (what it is), `format_version`, and what it records of its
files (sizes, sha256); `VerifiedFiles` checks those sums against the files on disk. The manifest
is the root of those checks, so it carries a checksum of its own content (`SELF_CHECKSUM`), which
`load_manifest` checks before anything in it is trusted. The JSON records xmine reads back that
stand alone (a text output's `OUT.json` summary, a benchmark result) are written and checked the
same way. This module imports nothing of xmine but its errors, so any module may use it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Iterator

from xmine.errors import ArtefactError, DamagedManifestError, check_every

MANIFEST = "manifest.json"
#: Written into a directory the claim creates for in-place building (stores, projections).
MARKER = ".xmine-output.json"


def read_json(path: Path) -> dict | None:
    """The JSON object in `path`, or None (missing, unreadable, not JSON, not an object)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
#: The field of a manifest that holds the sha256 of the rest of it (`manifest_digest`). It catches a
#: manifest damaged or edited where it stays valid JSON (a flipped digit in a size, a provenance
#: string changed), which nothing else could: the manifest is what the files are checked against.
#: A manifest without it (one written before xmine recorded it, or by hand) is read as before.
SELF_CHECKSUM = "manifest_sha256"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp creates files 0600; artefacts are meant to be shared like any file the user writes.
FILE_MODE = 0o666 & ~_umask()
DIR_MODE = 0o777 & ~_umask()


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the whole new one, never half."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


def fsync_file(path: str | Path) -> None:
    """Flush a written file to disk (before it is renamed into place)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path, *, before_replace: Callable[[Path], None] | None = None) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it is renamed onto `path`.

    For writers that want a file name (np.save, faiss.write_index, safetensors) rather than bytes.
    The temporary keeps `path`'s suffix so such libraries do not append another one.
    `before_replace(tmp)` runs on the finished temporary just before the rename (a record of it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_beside(path)
    try:
        yield tmp
        fsync_file(tmp)  # on disk before the rename, so a crash cannot leave `path` naming an empty file
        os.chmod(tmp, FILE_MODE)
        if before_replace is not None:
            before_replace(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        failed = write_failure(e, path)
        if failed is not None:
            raise failed from e
        raise


#: the hidden temporary folder an artefact directory is built in (`directory.atomic_dir`): .NAME.XXXXXXXX.tmp
_BUILT_IN = re.compile(r"^\.(.+)\.[A-Za-z0-9_]{8}\.tmp$")
#: what a library says where a write failed for want of room, not an errno (FAISS's RuntimeError
#: quotes strerror; numpy's tofile says "N requested and M written")
_WRITE_FAILURES = {"No space left on device": errno.ENOSPC, "File too large": errno.EFBIG,
                   "Disk quota exceeded": errno.EDQUOT}


def write_failure(e: BaseException, path: str | Path) -> OSError | None:
    """`e`, raised while writing the file `path`, as an OSError naming `path` where it says the disk
    (or a quota, or a file-size limit) was full, however the writing library put it; else None.
    The CLI turns it into one line with what to do (was: a traceback for FAISS's and numpy's)."""
    # Name the file the user asked for, not the hidden temporary folder it was being built in.
    path = Path(*(_BUILT_IN.sub(r"\1", part) for part in Path(path).parts))
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return OSError(e.errno, e.strerror, str(path))
    text = str(e)
    for words, code in _WRITE_FAILURES.items():
        if isinstance(e, (OSError, RuntimeError)) and words in text:
            return OSError(code, os.strerror(code), str(path))
    if isinstance(e, OSError) and not e.errno and " requested and " in text and " written" in text:
        return OSError(errno.EIO, f"written in part only ({text}): the disk is full or a file-size limit was reached",
                       str(path))
    return None


def temporary_beside(path: Path) -> Path:
    """A new hidden temporary file beside `path`, named after it, with its suffix."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}")
    os.close(fd)
    return Path(tmp)


def remove_path(path: Path) -> None:
    """Remove a file or a folder (a link: the link itself), whichever `path` is."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _renameat2_exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a))


def swap_in_dir(new: Path, path: Path) -> None:
    """Put `new` (a directory, or a file replacing a directory) in place of the existing `path`
    (a directory or a file) and delete the old one.

    Atomic where the system can exchange two paths in one step (Linux): a reader, or a kill at any
    moment, finds the old entry or the new one at `path`, never neither. Elsewhere the old one is
    moved to a hidden name first and put back if the second move fails."""
    new, path = Path(new), Path(path)
    if _renameat2_exchange(new, path):
        remove_path(new)  # (the old entry, now at the temporary's name)
        return
    old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
    os.replace(path, old / "x")
    try:
        os.replace(new, path)
    except BaseException:
        os.replace(old / "x", path)
        old.rmdir()
        raise
    shutil.rmtree(old, ignore_errors=True)


def missing(path: str | Path) -> str | None:
    """Why `path` names nothing to read, or None where it does: "no such file or directory", or a
    symbolic link that loops or names nothing (was: "does not exist" or "not an xmine artefact" for
    a link that loops)."""
    try:
        os.stat(path)
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symbolic link that loops (too many levels of symbolic links)"
        if e.errno != errno.ENOENT:
            return None  # (there, but not to be read: the reader's own error says why)
    if os.path.islink(path):
        return f"a symbolic link to {os.readlink(path)}, which does not exist"
    return "no such file or directory"


def sha256_file(path: str | Path, *, chunk: int = 1 << 20, consume: Callable[[bytes], None] | None = None) -> str:
    """The file's sha256; `consume`, where given, gets every chunk of its bytes in order on the way
    (a reader that checks the content reads the file once, not twice)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
            if consume is not None:
                consume(block)
    return h.hexdigest()


#: Artefacts up to this size have every file hashed when opened; larger ones have each file
#: hashed the first time it is read (VerifiedFiles.check), before anything computed from it is
#: written, so the hashing rides on a read that happens anyway.
VERIFY_ON_OPEN_BYTES = 64 << 20

# (path, inode, size, mtime_ns) of files whose sha256 matched in this process: checked once.
_VERIFIED: set[tuple] = set()


def check_names(names: Iterable[Any], allowed: Collection[str], *, where: str | Path, what: str) -> None:
    """ArtefactError unless every name, read from an artefact's manifest, is one of `allowed`: the
    plain file names its writer gives its files. Checked before any path is made of a name, so a
    manifest cannot make xmine read a file outside the artefact (`../x`, an absolute path), nor
    tell whether one exists."""
    for name in names:
        if not (isinstance(name, str) and name in allowed):
            raise ArtefactError(f"{where}: names the file {repr(name)[:80]}, which is not a file of an xmine {what}; "
                                "refusing to read it")


def inside(directory: str | Path, name: str, *, what: str) -> Path:
    """`directory/name`, refused (ArtefactError) when it resolves outside `directory`: a symbolic
    link out of the artefact. Whether its target exists is not looked at, nor told."""
    path = Path(directory) / name
    if not Path(os.path.realpath(path)).is_relative_to(os.path.realpath(directory)):
        raise ArtefactError(f"{path}: a symbolic link out of the {what}; refusing to read it")
    return path


class VerifiedFiles:
    """The sha256 sums an artefact's manifest records, checked against the files on disk.

    `expected` maps file names (relative to `directory`) to their `xmine.artefacts.records.FileRecord`;
    the artefact's reader has checked the names (`check_names`), and a file that resolves outside
    `directory` (a symbolic link out) is refused (`inside`). A file is hashed at most once per
    process (while it stays the same inode, size and mtime). A mismatch raises ArtefactError
    naming the file: it was changed or damaged after xmine wrote it. So is a file the manifest
    does not record: nothing unrecorded is read."""

    def __init__(self, directory: str | Path, expected: dict[str, Any], *, what: str):
        self.directory = Path(directory)
        self.expected = expected
        self.what = what

    @property
    def total_bytes(self) -> int:
        return sum(rec.bytes for rec in self.expected.values())

    def check(self, name: str, *, consume: Callable[[bytes], None] | None = None) -> None:
        """Check the file `name` (see the class doc); `consume` gets its bytes in order as they are
        hashed (`sha256_file`), or, where it was hashed before in this process, as it is read again."""
        rec = self.expected.get(name)
        if rec is None:
            raise ArtefactError(f"{self.directory / name}: not recorded in the {MANIFEST} of the {self.what}; "
                                "refusing to read it (damaged or edited manifest)")
        path = inside(self.directory, name, what=self.what)
        try:
            st = path.stat()
        except FileNotFoundError:
            raise ArtefactError(f"{path}: missing from the {self.what}") from None
        key = (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
        if key in _VERIFIED:
            if consume is not None:
                with open(path, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        consume(block)
            return
        if st.st_size != rec.bytes:
            raise ArtefactError(f"{path}: {st.st_size} bytes, the manifest of the {self.what} says "
                                f"{rec.bytes} (damaged or replaced)")
        if sha256_file(path, consume=consume) != rec.sha256:
            raise ArtefactError(f"{path}: content differs from the manifest of the {self.what} (sha256 "
                                "mismatch): changed or damaged since xmine wrote it; rebuild it")
        _VERIFIED.add(key)

    def check_sizes(self) -> None:
        """Every file is there with the size recorded (no hashing); ArtefactError names each that is not."""
        sizes = {inside(self.directory, n, what=self.what): rec.bytes for n, rec in self.expected.items()}
        if bad := [f"{p}: {f'{p.stat().st_size} bytes' if p.is_file() else 'missing'}, the manifest of the {self.what} "
                   f"records {b} (damaged or replaced)" for p, b in sizes.items()
                   if not p.is_file() or p.stat().st_size != b]:
            raise ArtefactError("\n".join(bad))

    def check_all(self, *, skip: Collection[str] = ()) -> int:
        """Check every file but those in `skip`; return the bytes verified. ArtefactError names every
        damaged file, one line each (was: the first, the next found after it was repaired)."""
        check_every((lambda n=name: self.check(n)) for name in self.expected if name not in skip)
        return self.total_bytes

    def check_if_small(self) -> None:
        if self.total_bytes <= VERIFY_ON_OPEN_BYTES:
            self.check_all()


#: Kinds whose names, their dashes read as spaces, are no phrase ("an xmine sentence transformer portable").
_KIND_PHRASES = {"sentence-transformer-portable": "portable sentence-transformers export",
                 "sentence-transformer-export": "sentence-transformers export",
                 "mining-sets": "folder of `bench mining` sets", "scored-pairs": "scored bitext (xmine score)",
                 "massive-template-pairs": "file of MASSIVE template pairs"}


def kind_label(kind: str) -> str:
    """How a kind reads in a message, after "an xmine": "embedding-store" -> "embedding store",
    "xmine-benchmark-result" -> "benchmark result" (not "an xmine xmine benchmark result")."""
    return _KIND_PHRASES.get(str(kind)) or str(kind).removeprefix("xmine-").replace("-", " ")


def manifest_digest(manifest: dict[str, Any]) -> str:
    """sha256 of a manifest's content without its `SELF_CHECKSUM`: of its canonical JSON (keys
    sorted, no spaces, UTF-8), so that neither the indentation nor the order of keys counts."""
    body = {k: v for k, v in manifest.items() if k != SELF_CHECKSUM}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def atomic_write_manifest(path: str | Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Write the manifest file `path` atomically with its `SELF_CHECKSUM` last; return it as read back.

    The digest is taken over the manifest as JSON will read it back (tuples as lists, keys as
    strings, other objects as their `str`), so a reader recomputes the same digest from the file."""
    as_read = json.loads(json.dumps(manifest, ensure_ascii=False, default=str))
    as_read.pop(SELF_CHECKSUM, None)
    as_read[SELF_CHECKSUM] = manifest_digest(as_read)
    atomic_write_json(path, as_read)
    return as_read


def write_manifest(directory: str | Path, kind: str, body: dict[str, Any], *, format_version: int = 1) -> dict:
    """Write `directory/manifest.json` atomically: {kind, format_version, **body, SELF_CHECKSUM}."""
    return atomic_write_manifest(Path(directory) / MANIFEST, {"kind": kind, "format_version": format_version, **body})


def load_manifest(path: str | Path, *, what: str = "manifest", advice: str | None = None) -> dict[str, Any]:
    """The JSON object in the manifest file `path`, without its `SELF_CHECKSUM`; ArtefactError when
    it cannot be read, is not valid JSON (where it fails: line, column), is not an object, or its
    content no longer matches the checksum it was written with. `what` names the file in those
    messages: every JSON record xmine writes through `atomic_write_manifest` (a benchmark result,
    an output's summary) is read back here; `advice` ends a damaged one's refusal (`unseal`)."""
    try:
        manifest = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ArtefactError(f"{path}: unparseable {what}, not valid JSON ({e})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ArtefactError(f"{path}: unreadable {what} ({e})") from None
    except (ValueError, RecursionError) as e:  # an integer of thousands of digits, arrays nested thousands deep
        raise ArtefactError(f"{path}: not a {what} xmine writes ({type(e).__name__}: {str(e)[:100]})") from None
    if not isinstance(manifest, dict):
        raise ArtefactError(f"{path}: a JSON {type(manifest).__name__}, not the object an xmine {what} is")
    unseal(manifest, path, advice=advice)
    return manifest


def intact(record: dict[str, Any]) -> bool:
    """Whether a JSON object read from a file still matches the `SELF_CHECKSUM` it was written
    with; one without it (written before xmine recorded it, or by hand) counts as intact."""
    return SELF_CHECKSUM not in record or record[SELF_CHECKSUM] == manifest_digest(record)


def unseal(record: dict[str, Any], path: str | Path, *, advice: str | None = None) -> bool:
    """Remove `SELF_CHECKSUM` from `record` (a JSON object read from the file `path`) and check it;
    DamagedManifestError when the content no longer matches it, its message ending with `advice`
    (what to do with that kind of file; default: rebuild the artefact). False when `record` has
    none (one written before xmine recorded it, or by hand): it is read as before, and a caller may
    say so."""
    if not intact(record):
        raise DamagedManifestError(path) if advice is None else DamagedManifestError(path, advice)
    return record.pop(SELF_CHECKSUM, None) is not None


def manifest_kind(directory: Path) -> str:
    """The `kind` the manifest of the artefact `directory` records (`load_manifest`'s errors, or one
    when it records none)."""
    kind = load_manifest(directory / MANIFEST).get("kind")
    if not isinstance(kind, str):
        raise ArtefactError(f"{directory / MANIFEST}: records no kind (field 'kind' is {kind!r}); not an xmine artefact")
    return kind


def read_manifest(directory: str | Path, kind: str | tuple[str, ...], *,
                  format_version: int | None = None) -> dict[str, Any]:
    """Read and check `directory/manifest.json`; raise ArtefactError if absent, of another kind or
    (with `format_version`) of another format: one made by an older xmine is rebuilt, not read."""
    path = Path(directory) / MANIFEST
    kinds = (kind,) if isinstance(kind, str) else kind
    if why := missing(directory):  # (was: "not an xmine projection (no manifest.json)" for a typo)
        raise ArtefactError(f"{directory}: {why}")
    if not path.is_file():
        # the marker of a claimed output: one that a run is writing, or left when it stopped
        claimed = (read_json(Path(directory) / MARKER) or {}).get("kind")
        if claimed in kinds:  # (was: "not an xmine projection", where verify said what it is)
            raise ArtefactError(f"{directory}: an unfinished xmine {kind_label(claimed)} (no {MANIFEST}): the run that "
                                "makes it is running, stopped or failed; run it again (once what it said is mended)")
        raise ArtefactError(f"{directory}: not an xmine {' or '.join(map(kind_label, kinds))} (no {MANIFEST})")
    manifest = load_manifest(path)
    if manifest.get("kind") not in kinds:
        found = manifest.get("kind")
        what = f"an xmine {kind_label(found)}" if isinstance(found, str) else f"of no kind xmine knows ({found!r})"
        raise ArtefactError(f"{directory}: is {what}, not an xmine {' or '.join(map(kind_label, kinds))}")
    found = manifest.get("format_version")
    if format_version is not None and found != format_version:
        if isinstance(found, int) and found < format_version:
            raise ArtefactError(f"{directory}: made by an older xmine ({manifest['kind']} format {found}, this "
                                f"xmine reads format {format_version}); rebuild it")
        raise ArtefactError(f"{directory}: {manifest['kind']} format {found!r}, this xmine reads format "
                            f"{format_version} (made by a newer xmine?)")
    return manifest
