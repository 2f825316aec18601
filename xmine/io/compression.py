"""Opening an input file for its bytes: gzip, xz, bzip2 and zstd detected by their magic bytes,
whatever the file is called (zstd needs the `zstandard` package); lone `\\r` line ends sniffed;
lines counted without decoding. `xmine.io.corpus` reads the lines of what this opens."""

from __future__ import annotations

import gzip
import io
import re
import zlib
from pathlib import Path
from typing import BinaryIO

from xmine.artefacts.fileio import missing
from xmine.errors import InputError

_GZIP_MAGIC = b"\x1f\x8b"
#: magic bytes -> compression name (gzip, xz, bzip2, zstd frames)
_MAGIC = {_GZIP_MAGIC: "gzip", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}
# bzip2: "BZh", the block size 1-9, then a block's or the stream end's magic (a text file may
# well start with "BZh").
_BZIP2 = re.compile(rb"BZh[1-9](\x31\x41\x59\x26\x53\x59|\x17\x72\x45\x38\x50\x90)", re.DOTALL)


def check_input_file(path: Path) -> None:
    if why := missing(path):
        raise InputError(path, why)
    if path.is_dir():
        raise InputError(path, "is a directory, expected a text file with one sentence per line")
    if not path.is_file():  # a pipe, process substitution or device: xmine reads an input more than once
        raise InputError(path, "is a pipe or another non-regular file, which is not supported as input "
                               "(it is read more than once); save it to a file first")
    if path.stat().st_size == 0:
        raise InputError(path, "file is empty")


def compression_of(path: str | Path) -> str | None:
    """"gzip", "xz", "bzip2" or "zstd" when the file starts with that format's magic bytes, else None."""
    with open(path, "rb") as f:
        head = f.read(10)
    if _BZIP2.match(head):
        return "bzip2"
    return next((name for magic, name in _MAGIC.items() if head.startswith(magic)), None)


def open_binary(path: str | Path) -> BinaryIO:
    """Open `path` for reading bytes, decompressing gzip, xz, bzip2 or zstd transparently
    (detected by content)."""
    path = Path(path)
    check_input_file(path)
    kind = compression_of(path)
    if kind == "gzip":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if kind == "xz":
        import lzma

        return lzma.open(path, "rb")  # type: ignore[return-value]
    if kind == "bzip2":
        import bz2

        return bz2.open(path, "rb")  # type: ignore[return-value]
    if kind == "zstd":
        try:
            import zstandard
        except ImportError:
            raise InputError(path, "is zstd-compressed; reading it needs the zstandard package "
                                   "(pip install zstandard)") from None
        return io.BufferedReader(_ZstdFrames(path, zstandard))
    return open(path, "rb")


class _ZstdFrames(io.RawIOBase):
    """The decompressed bytes of a file of zstd frames, every frame read to its end.

    zstandard's own `stream_reader` ends the text without a word where a file was cut (inside a
    frame), so a truncated file would read as a shorter corpus; here a file that ends inside a
    frame raises `ZstdError`, and bytes after the last frame that are no frame do too."""

    _CHUNK = 1 << 16

    def __init__(self, path: Path, zstandard) -> None:  # noqa: ANN001 (an optional module)
        self._file = open(path, "rb")
        self._dctx = zstandard.ZstdDecompressor()
        self._frame = None  # the decompressor of the frame being read; None between frames
        self._out = b""  # decompressed bytes not returned yet, from `self._at` on
        self._at = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # noqa: ANN001 (a writable buffer)
        while self._at == len(self._out):
            chunk = self._file.read(self._CHUNK)
            if not chunk:
                if self._frame is not None:
                    # EOFError, as gzip, xz and bzip2 say it (`read_error`)
                    raise EOFError("the file ends inside a zstd frame")
                return 0
            self._out, self._at = self._decompress(chunk), 0
        n = min(len(buffer), len(self._out) - self._at)
        buffer[:n] = self._out[self._at:self._at + n]
        self._at += n
        return n

    def _decompress(self, data: bytes) -> bytes:
        parts = []
        while data:
            if self._frame is None:
                self._frame = self._dctx.decompressobj()
            parts.append(self._frame.decompress(data))
            if not self._frame.eof:
                break
            data, self._frame = self._frame.unused_data, None  # the next frame starts there
        return b"".join(parts)

    def close(self) -> None:
        self._file.close()
        super().close()


def read_errors() -> tuple[type[BaseException], ...]:
    """What a damaged compressed stream raises while it is read (turned into InputError)."""
    import lzma  # (bz2 raises OSError)

    errors: tuple[type[BaseException], ...] = (gzip.BadGzipFile, EOFError, OSError, lzma.LZMAError, zlib.error)
    try:
        import zstandard

        errors += (zstandard.ZstdError,)
    except ImportError:
        pass
    return errors


def read_error(path: str | Path, error: BaseException, compression: str | None, line: int) -> InputError:
    """The InputError for a `read_errors()` error met at `line`: a stream that ends early is a
    truncated file (said as such, for the whole file), anything else damage at that line."""
    if isinstance(error, EOFError):
        return InputError(path, f"truncated {compression or 'file'}: {error}; the file was cut short "
                                "(copy or download it again)")
    return InputError(path, f"cannot read (corrupt {compression or 'file'}?): {error}", line=line)


_SNIFF_BYTES = 1 << 20


def file_head(path: str | Path) -> bytes:
    """The first MB of a (possibly compressed) file, as line ends are judged from it; b"" where it
    cannot be read (the read proper reports that, with the line)."""
    with open_binary(path) as f:
        try:
            return f.read(_SNIFF_BYTES)
        except read_errors():
            return b""


def uses_cr_line_ends(path: str | Path) -> bool:
    """True for a file with lone `\\r` line ends: carriage returns but no `\\n` in its first MB."""
    head = file_head(path)
    return b"\r" in head and b"\n" not in head


def count_lines(path: str | Path) -> int:
    """Lines in a (possibly compressed) file, counted fast without decoding (a last line without a
    newline counts)."""
    end = b"\r" if uses_cr_line_ends(path) else b"\n"
    n = 0
    last = end
    with open_binary(path) as f:
        try:
            for block in iter(lambda: f.read(1 << 20), b""):
                n += block.count(end)
                last = block[-1:]
        except read_errors() as e:
            raise read_error(path, e, compression_of(path), n + 1) from None
    return n + (last != end)
