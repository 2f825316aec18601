"""Inputs that are streams rather than local files: standard input (`-`) and fsspec URLs
(`s3://`, `hf://`, `gcs://`, `https://`, `memory://`, `file://`, ...).

xmine reads an input more than once (checked, then embedded) and by offset, so a stream is first
copied, block by block, into a local file, and read from there in any single-file format
(--input-format; by default one sentence a line, compressed or not). Standard input goes into the
command's own work directory. A URL is copied with fsspec (installed with `datasets`; a protocol
whose package is missing, `s3fs` for s3://, is one error line saying so), its sha256 computed as
it is read, and beside the copy a small record (`URL_ORIGIN`) of the URL, size and sha256: the
readers record the URL, not the local copy, as the input's path (`origin_of`), so a store or a
mining result says where its input really came from, and a later run from another copy resumes.
A URL names one file: stores, indexes and dataset folders are read from local disk.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import posixpath
import re
import sys
from pathlib import Path

from xmine.errors import InputError
from xmine.artefacts.fileio import atomic_path, read_json
from xmine.tempdirs import temporary_directory

STDIN = "-"
#: the record of a URL's copy, beside it
URL_ORIGIN = ".xmine-url-origin.json"
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_BLOCK = 1 << 20


def is_stdin(path) -> bool:
    return str(path) == STDIN


def is_url(path) -> bool:
    """A string naming a protocol (`proto://...`). (A pathlib.Path has lost one slash already.)"""
    return isinstance(path, str) and bool(_URL.match(path))


def spool_stdin(directory: str | Path) -> Path:
    """Copy standard input into `directory/stdin` (replacing an earlier copy) and return that path.
    Its origin record says it is standard input, so the readers record `-`, not the copy."""
    target = Path(directory) / "stdin"
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with atomic_path(target) as tmp, open(tmp, "wb") as f:
        while block := sys.stdin.buffer.read(_BLOCK):
            digest.update(block)
            size += len(block)
            f.write(block)
    if size == 0:
        raise InputError(STDIN, "standard input is empty")
    (target.parent / URL_ORIGIN).write_text(json.dumps({"url": STDIN, "file": target.name, "size": size,
                                                        "sha256": digest.hexdigest()}), encoding="utf-8")
    return target


def spool_url(url: str, directory: str | Path) -> Path:
    """Copy the file at `url` into `directory` (under its own name, so that its extension still
    says its format) with its origin record; the local copy's path. InputError (naming the URL)
    for an unknown protocol, a missing package, a missing file, a folder or a failed read."""
    protocol = url.split("://", 1)[0].lower()
    try:
        import fsspec

        fsspec.get_filesystem_class(protocol)
        fs, remote = fsspec.core.url_to_fs(url)
    except ValueError:
        raise InputError(url, f"unknown protocol {protocol!r} (not one fsspec knows)") from None
    except ImportError as e:
        raise InputError(url, f"protocol {protocol!r} needs a package that is not installed: {e}") from None
    try:
        if fs.isdir(remote):
            raise InputError(url, "a folder: a URL input names one file (stores, indexes and dataset folders "
                                  "are read from local disk)")
        name = posixpath.basename(remote.rstrip("/")) or "input"
        target = Path(directory) / hashlib.sha256(url.encode()).hexdigest()[:16] / name
        target.parent.mkdir(parents=True, exist_ok=True)
        digest, size = hashlib.sha256(), 0
        with fs.open(remote, "rb") as source, atomic_path(target) as tmp, open(tmp, "wb") as f:
            while block := source.read(_BLOCK):
                digest.update(block)
                size += len(block)
                f.write(block)
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(url, "no such file") from None
    except OSError as e:
        raise InputError(url, f"unreadable: {_one_line(e)}") from None
    except Exception as e:  # noqa: BLE001 - each fsspec backend fails its own way, none an OSError: aiohttp's
        # ClientPayloadError for a download cut short, httpx's ConnectError for hf:// with no network
        raise InputError(url, f"unreadable ({type(e).__name__}: {_one_line(e)})") from None
    if size == 0:
        raise InputError(url, "empty file")
    (target.parent / URL_ORIGIN).write_text(json.dumps({"url": url, "file": name, "size": size,
                                                        "sha256": digest.hexdigest()}), encoding="utf-8")
    return target


def _one_line(error: BaseException) -> str:
    """An error's message on one line, at most 300 characters (a backend's may span many)."""
    return " ".join(str(error).split())[:300]


def origin_of(path) -> str | None:
    """The URL a local copy made by `spool_url` came from (`-` for `spool_stdin`'s), else None."""
    if path is None or is_stdin(path) or is_url(path):
        return path if is_url(path) else None
    origin = read_json(Path(path).parent / URL_ORIGIN) or {}
    return origin.get("url") if origin.get("file") == Path(path).name else None


def recorded_path(path) -> str:
    """An input's path as an artefact's record names it: `-` for standard input (or its copy), the
    URL of a copy of one (or the URL), else the path resolved."""
    return STDIN if is_stdin(path) else origin_of(path) or str(Path(path).resolve())


def as_given(e: InputError) -> InputError:
    """`e` naming the input as the user gave it (`-`, a URL) where its path is a copy made here (was:
    `/tmp/xmine-stream-.../stdin:81: invalid JSON`): raised while the copy, and its origin record,
    still exist."""
    origin = origin_of(e.path)
    return InputError(origin, e.problem, line=e.line) if origin else e


def shown_path(path) -> str:
    """What to record as an input's path: its URL when it is a copy of one, else the path."""
    return origin_of(path) or str(path)


def with_local_inputs(*names: str):
    """Decorate a function whose arguments `names` are inputs: a URL among them is copied
    (`spool_url`) into a temporary directory, removed when the function returns, and the function
    gets the local copy; paths are passed as they are."""

    def decorate(f):
        signature = inspect.signature(f)

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            urls = [n for n in names if is_url(bound.arguments.get(n))]
            if not urls:
                return f(*args, **kwargs)
            with temporary_directory("url") as tmp:
                for n in urls:
                    bound.arguments[n] = spool_url(bound.arguments[n], tmp)
                try:
                    return f(*bound.args, **bound.kwargs)
                except InputError as e:
                    raise as_given(e) from None

        return wrapper

    return decorate


__all__ = ["STDIN", "URL_ORIGIN", "as_given", "is_stdin", "is_url", "origin_of", "recorded_path", "shown_path",
           "spool_stdin", "spool_url", "with_local_inputs"]
