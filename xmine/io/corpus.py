"""Reading sentence corpora: one sentence per line, plain text or compressed, validated, streamed;
and line-aligned parallel files (a source and a target file, line i of one the translation of
line i of the other), read as one file is.

Input policy (what every xmine command does with a text file):

- Compression: gzip, xz, bzip2 and zstd are detected by their magic bytes, whatever the file is
  called (zstd needs the `zstandard` package; `xmine.io.compression`). Other input formats (JSON Lines, Parquet, Hugging
  Face datasets) are read by `xmine.io.readers`, which uses this module for the lines of a file.
- Encoding: UTF-8. A leading byte-order mark is stripped. Invalid UTF-8 raises `InputError`
  naming the file, the line, the byte offset within that line and a snippet of the bytes.
- NUL bytes raise `InputError` with the line (they mean a binary or UTF-16 file).
- Line ends: `\\n` separates lines; a `\\r` before it (Windows `\\r\\n`) is removed. A file whose
  first megabyte has carriage returns but no `\\n` uses lone `\\r` line ends (classic Mac OS):
  there `\\r` separates lines, so its sentences are never merged into one.
- Tabs and stray line-break characters inside a line (`\\r`, `\\v`, `\\f`, U+0085, U+2028,
  U+2029, ...) are replaced by one space each: they would break the one-sentence-per-line and
  TSV files xmine writes. Counted and reported as a warning.
- Whitespace around a sentence (spaces, a no-break space, ...) is removed: a trailing space
  changes a transformer's embedding, and the duplicate check and `xmine score` read sentences
  without it (was: "X" and "X " one sentence there, two vectors here). Nothing else is changed.
- Empty lines, and lines of only whitespace and characters that show nothing (zero-width space and
  joiners, word joiner, byte-order mark, soft hyphen: `is_blank`), keep their line number (so output
  refers to the user's lines) but are not sentences: they are skipped and their count is reported
  as a warning.
- Lines longer than `max_chars` characters (default `DEFAULT_MAX_CHARS`) are kept whole in the
  text, but `truncate_for_encoding` cuts them for the encoder, which would truncate them at its
  token limit anyway (and a megabyte-long "line" would only cost tokeniser time). A warning names
  the first such lines.
- A missing path, a directory, an empty file, or a file without a single non-empty line raises
  `InputError`. Parallel files whose line counts differ raise `InputError` naming both files and
  both counts.

Warnings go through the `logging` logger "xmine.io.corpus" (level WARNING), once per file at the end
of the read, and are also counted in `CorpusStats` so code can act on them. The CLI prints
WARNING records to stderr (Python's last-resort handler does so even when nothing configured
logging).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO, Iterator, Sequence

import numpy as np

from xmine.io.compression import compression_of, count_lines, open_binary, read_error, read_errors, uses_cr_line_ends
from xmine.errors import InputError

log = logging.getLogger("xmine.io.corpus")

#: Characters per line beyond which the text is cut for encoding. multilingual-e5 sees at most 512
#: tokens, roughly 2,000 characters of European text; longer lines are rarely sentences anyway.
DEFAULT_MAX_CHARS = 2000

#: How many offending line numbers a warning lists before saying "and N more".
WARN_LIST = 5

_BOM = "\ufeff"
#: characters that show nothing: zero-width space, non-joiner, joiner, word joiner, byte-order mark, soft hyphen
_INVISIBLE_CHARS = "\u200b\u200c\u200d\u2060\ufeff\u00ad"
_INVISIBLE = dict.fromkeys(map(ord, _INVISIBLE_CHARS))
# Characters that split lines for str.splitlines() or columns in TSV; \n is the separator itself.
_BREAKERS = re.compile("[\t\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_LINE_BREAKERS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")  # the same, tabs kept


def is_blank(text: str) -> bool:
    """Whether `text` has nothing to read: only whitespace and invisible characters (was: a line of
    zero-width spaces embedded as a sentence, a vector of nothing that search returned)."""
    stripped = text.strip()
    # Translated only where the first character left is an invisible one: rare, and a translation of
    # every line of a corpus costs hundreds of times its strip (was: every line translated).
    return not stripped or (stripped[0] in _INVISIBLE_CHARS and not stripped.translate(_INVISIBLE).strip())


@dataclass(kw_only=True)
class CorpusStats:
    """What reading a file found; filled in while `iter_corpus` runs, complete when it ends."""

    #: the file read
    path: Path
    #: lines in the file (including empty ones)
    lines: int = 0
    #: non-empty lines, i.e. sentences yielded
    sentences: int = 0
    #: empty or whitespace-only lines (skipped)
    empty_lines: int = 0
    #: line numbers longer than max_chars (the first few; `long_count` has the total)
    long_lines: list[int] = field(default_factory=list)
    #: how many lines are longer than max_chars
    long_count: int = 0
    #: how many lines had tabs or stray line breaks replaced by spaces
    replaced_count: int = 0
    #: how many of those held a tab
    tab_lines: int = 0
    #: whether the file was gzip-compressed
    gzip: bool = False
    #: the file's compression ("gzip", "xz", "bzip2", "zstd") or None
    compression: str | None = None
    #: lines the encoder cut at its token limit (the first few; `token_cut_count` has the total)
    token_cut_lines: list[int] = field(default_factory=list)
    #: how many lines the encoder cut at its token limit (filled by `note_token_cuts`)
    token_cut_count: int = 0
    #: the encoder's token limit, when known
    max_tokens: int | None = None
    #: what the warnings call a record and its number: "line" (a file's), "item" (a Python list's,
    #: numbered from 0: `as_list`)
    unit: str = "line"

    def as_list(self, name: str) -> "CorpusStats":
        """These stats of a file written from Python list `name`, one item a line (xmine.mining.api),
        as said of the list: its name and its 0-based items, as the result numbers them."""
        return replace(self, path=Path(f"{name} (the list given)"), unit="item",
                       long_lines=[n - 1 for n in self.long_lines],
                       token_cut_lines=[n - 1 for n in self.token_cut_lines])

    def note_line(self, line_no: int, text: str, max_chars: int) -> bool:
        """Count one line (or record) read: False for an empty one (skipped), True for a sentence."""
        if is_blank(text):
            self.empty_lines += 1
            return False
        if len(text) > max_chars:
            self.long_count += 1
            if len(self.long_lines) < WARN_LIST:
                self.long_lines.append(line_no)
        self.sentences += 1
        return True

    def note_token_cuts(self, line_numbers: Sequence[int], max_tokens: int | None) -> None:
        """Record lines (by file line number) that the encoder cuts at `max_tokens` tokens."""
        self.max_tokens = max_tokens
        self.token_cut_count += len(line_numbers)
        room = WARN_LIST - len(self.token_cut_lines)
        self.token_cut_lines.extend(int(n) for n in list(line_numbers)[:max(room, 0)])

    def warnings(self, max_chars: int) -> list[str]:
        """The warnings this read deserves, as human-readable sentences."""
        def lines(shown: list[int], count: int) -> str:
            return ", ".join(map(str, shown)) + (f" and {count - len(shown)} more" if count > len(shown) else "")

        out, unit = [], self.unit
        if self.empty_lines:
            out.append(f"{self.path}: {self.empty_lines} empty {unit}(s) skipped ({unit} numbers are kept)")
        if self.long_count:
            out.append(f"{self.path}: {self.long_count} {unit}(s) longer than {max_chars} characters are cut "
                       f"to that length for encoding ({unit}s {lines(self.long_lines, self.long_count)})")
        if self.token_cut_count:
            out.append(f"{self.path}: {self.token_cut_count} {unit}(s) longer than the encoder's {self.max_tokens} "
                       f"tokens are cut there: their end is not encoded, so {unit}s that differ only after it get "
                       f"the same vector ({unit}s {lines(self.token_cut_lines, self.token_cut_count)})")
        if self.replaced_count:
            columns = ("; every line holds a tab, as a tab-separated file's do: to read one of its columns "
                       "give --input-format tsv --text-column N (`mine`: --src-input-format or --tgt-input-format)"
                       if self.tab_lines == self.sentences and unit == "line" else "")
            out.append(f"{self.path}: tabs or line-break characters inside {self.replaced_count} {unit}(s) "
                       f"replaced by spaces{columns}")
        return out


@dataclass(kw_only=True)
class Corpus:
    """A corpus read into memory: the sentences and the 1-based file line of each."""

    path: Path
    sentences: list[str]
    #: int64, line_numbers[i] is the file line of sentences[i]
    line_numbers: np.ndarray
    stats: CorpusStats

    def __len__(self) -> int:
        return len(self.sentences)


#: The longest line read (bytes): a line longer is no sentence nor record xmine can use, and reading
#: it whole would hold it all in memory (was: a 970 KB .gz expanding to one 2 GB line took 4 GB,
#: then a MemoryError). Documents of many megabytes a record still fit.
MAX_LINE_BYTES = 64 << 20


class LineTooLong(Exception):
    """A line of more than MAX_LINE_BYTES (iter_lines names the file and line)."""


def raw_lines(f: BinaryIO, cr: bool) -> Iterator[bytes]:
    """The file's lines as bytes (with their end), split on `\\n`, or on `\\r` when `cr`; none
    longer than MAX_LINE_BYTES (`LineTooLong`)."""
    if not cr:
        while line := f.readline(MAX_LINE_BYTES + 1):
            if len(line) > MAX_LINE_BYTES:
                raise LineTooLong
            yield line
        return
    rest = b""
    for block in iter(lambda: f.read(1 << 20), b""):
        parts = (rest + block).split(b"\r")
        rest = parts.pop()
        if len(rest) > MAX_LINE_BYTES or any(len(part) > MAX_LINE_BYTES for part in parts):
            raise LineTooLong
        for part in parts:
            yield part + b"\n"
    if rest:
        yield rest


def decode_line(raw: bytes, path: Path, line_no: int) -> str:
    """One line's bytes as UTF-8 text; an InputError naming the file, the line and the byte where
    they are not (a NUL byte: binary data or UTF-16). Every reader of a text file says it alike."""
    if b"\x00" in raw:
        col = raw.index(b"\x00")
        # a Parquet file named without .parquet says so by its first bytes (was: "binary data" alone)
        what = "a Parquet file (name it .parquet, or give its format)" if line_no == 1 and raw.startswith(b"PAR1") else \
            "binary data or a UTF-16 file"
        raise InputError(path, f"NUL byte at byte {col} of the line: {what}, expected UTF-8 text", line=line_no)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        snippet = raw[max(0, e.start - 10): e.end + 10]
        raise InputError(path, f"invalid UTF-8 at byte {e.start} of the line ({e.reason}; bytes near it: {snippet!r}); "
                               "convert the file to UTF-8, e.g. with iconv", line=line_no) from None


def iter_lines(path: str | Path, *, stats: CorpusStats | None = None,
               keep_tabs: bool = False) -> Iterator[tuple[int, str]]:
    """Yield (line_number, text) for EVERY line of the file, empty ones included, validated.

    Line numbers are 1-based. Text has its newline (and a `\\r` before it) removed, a BOM at its
    start stripped (the first line's, or one of a file joined with `cat`), and tabs/stray line
    breaks replaced by spaces (see the module doc); `keep_tabs`: tabs are kept (TSV columns).
    """
    path = Path(path)
    breakers = _LINE_BREAKERS if keep_tabs else _BREAKERS
    st = stats if stats is not None else CorpusStats(path=path)
    cr = uses_cr_line_ends(path)
    with open_binary(path) as f:
        st.compression = compression_of(path)
        st.gzip = st.compression == "gzip"
        try:
            for line_no, raw in enumerate(raw_lines(f, cr), start=1):
                if raw.endswith(b"\n"):
                    raw = raw[:-1]
                if raw.endswith(b"\r"):
                    raw = raw[:-1]
                text = decode_line(raw, path, line_no)
                if text.startswith(_BOM):  # every line's: a file joined from several (`cat a b`) holds
                    text = text[1:]         # theirs (was: the first only; the others stored and mined)
                if breakers.search(text):
                    st.tab_lines += "\t" in text.strip()  # (between words, as columns are: not a trailing one)
                    text = breakers.sub(" ", text)
                    st.replaced_count += 1
                st.lines = line_no
                yield line_no, text
        except LineTooLong:
            raise InputError(path, f"longer than {MAX_LINE_BYTES >> 20} MiB: no sentence nor record xmine reads "
                                   "(a file without line breaks, or a decompression bomb?)", line=st.lines + 1) from None
        except read_errors() as e:
            if isinstance(e, FileNotFoundError):
                raise
            raise read_error(path, e, st.compression, st.lines + 1) from None


def iter_corpus(path: str | Path, *, max_chars: int = DEFAULT_MAX_CHARS, stats: CorpusStats | None = None,
                warn: bool = True) -> Iterator[tuple[int, str]]:
    """Stream the sentences of a corpus: yield (line_number, sentence) for each non-empty line.

    Memory stays bounded whatever the file size. Pass a `CorpusStats` to see what was skipped;
    it is complete once the iterator is exhausted. Raises `InputError` on bad input (see the
    module doc), including, at the end, when the file holds no sentence at all. `warn=False`
    keeps the warnings out of the log (they are still counted in `stats`).
    """
    path = Path(path)
    st = stats if stats is not None else CorpusStats(path=path)
    for line_no, text in iter_lines(path, stats=st):
        if st.note_line(line_no, text, max_chars):
            yield line_no, text.strip()
    if st.sentences == 0:
        raise InputError(path, f"no sentence in the file ({st.lines} line(s), all empty or whitespace)")
    if warn:
        for message in st.warnings(max_chars):
            log.warning(message)


def read_corpus(path: str | Path, *, max_chars: int = DEFAULT_MAX_CHARS) -> Corpus:
    """Read a whole corpus into memory (see `iter_corpus` for the policy and errors)."""
    path = Path(path)
    stats = CorpusStats(path=path)
    numbers, sentences = zip(*iter_corpus(path, max_chars=max_chars, stats=stats))  # (never empty: it raises)
    return Corpus(path=path, sentences=list(sentences), line_numbers=np.asarray(numbers, dtype=np.int64), stats=stats)


def iter_parallel(
    src_path: str | Path, tgt_path: str | Path, *, max_chars: int = DEFAULT_MAX_CHARS, warn: bool = True
) -> Iterator[tuple[int, str, str]]:
    """Stream line-aligned parallel files: yield (line_number, src, tgt) for the lines where both
    sides are non-empty, each side stripped of the whitespace around it as `iter_corpus` does (so
    a training pair embeds as the same sentence mined later does). Lines empty on either side are
    skipped on both (counted in a warning).

    Raises `InputError` naming both files and both line counts when their lengths differ
    (checked before anything is yielded, so a caller never sees half an answer). `warn=False`:
    the warnings are left out (a second reading of files already read once).
    """
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    n_src, n_tgt = count_lines(src_path), count_lines(tgt_path)
    if n_src != n_tgt:
        raise InputError(
            src_path,
            f"parallel files differ in length: {src_path} has {n_src} line(s), {tgt_path} has {n_tgt}",
        )
    s_stats, t_stats = CorpusStats(path=src_path), CorpusStats(path=tgt_path)
    skipped, tabbed, tabs_before = 0, [0, 0], [0, 0]
    for (line_no, s), (_, t) in zip(iter_lines(src_path, stats=s_stats), iter_lines(tgt_path, stats=t_stats)):
        tabs = [st.tab_lines for st in (s_stats, t_stats)]  # (what this line added: it held a tab)
        line_tabs, tabs_before = [a - b for a, b in zip(tabs, tabs_before)], tabs
        if is_blank(s) or is_blank(t):
            skipped += 1
            continue
        tabbed = [n + d for n, d in zip(tabbed, line_tabs)]
        s_stats.note_line(line_no, s, max_chars)
        t_stats.note_line(line_no, t, max_chars)  # (counts the pairs as its sentences)
        yield line_no, s.strip(), t.strip()
    if s_stats.sentences == 0:
        raise InputError(src_path, f"no sentence pair with both sides non-empty in {src_path} and {tgt_path}")
    for st, n in zip((s_stats, t_stats), tabbed):  # (was: a warning naming --input-format, an option no
        if n == st.sentences:  # parallel reader has, and both columns trained on as one side's sentences)
            raise InputError(st.path, "every line holds a tab, as a tab-separated file's do (both languages in one "
                                      "file?): a side of parallel files is one sentence a line; give each column as a "
                                      "file of its own (cut -f1 FILE > src.txt; cut -f2 FILE > tgt.txt)")
    if not warn:
        return
    if skipped:
        log.warning(f"{src_path} / {tgt_path}: {skipped} line(s) empty on one or both sides skipped")
    for st in (s_stats, t_stats):
        for message in st.warnings(max_chars):
            if "empty line" not in message:
                log.warning(message)


#: pairs that hold the same text on both sides more often than this are no set of translations (a
#: copy of one side, or one file twice under two names): calibration would measure how copies score,
#: training would learn nothing of language. Translations hold far fewer: FLORES-200 devtest against
#: English, none in any of its 203 languages; the 151 Tatoeba-challenge pairs of ../shared, at most
#: 0.4% (Gronings-English).
MAX_IDENTICAL_SHARE = 0.2


def copies_among(pairs: Sequence[tuple[str, str]]) -> int | None:
    """How many of `pairs` hold the same text on both sides, where that is more than
    MAX_IDENTICAL_SHARE of them (no set of translations); None where it is not."""
    identical = sum(s == t for s, t in pairs)
    return identical if identical > MAX_IDENTICAL_SHARE * len(pairs) else None


def read_parallel(
    src_path: str | Path, tgt_path: str | Path, *, max_chars: int = DEFAULT_MAX_CHARS
) -> tuple[list[str], list[str]]:
    """Read line-aligned parallel files into two equally long lists (see `iter_parallel`)."""
    _, src, tgt = zip(*iter_parallel(src_path, tgt_path, max_chars=max_chars))  # (never empty: it raises)
    return list(src), list(tgt)


def truncate_for_encoding(sentences: Sequence[str], max_chars: int = DEFAULT_MAX_CHARS) -> list[str]:
    """The sentences cut to `max_chars` characters each (the text to give the encoder)."""
    return [s if len(s) <= max_chars else s[:max_chars] for s in sentences]


__all__ = [
    "DEFAULT_MAX_CHARS", "MAX_IDENTICAL_SHARE", "MAX_LINE_BYTES", "Corpus", "CorpusStats", "LineTooLong", "copies_among",
    "decode_line", "raw_lines",
    "is_blank", "iter_corpus", "iter_lines", "iter_parallel", "read_corpus", "read_parallel", "truncate_for_encoding",
]
