"""Line-aligned parallel files (a source and a target file, line i of one the translation of line
i of the other), read as `xmine.io.corpus` reads one file."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterator

from xmine.io.compression import count_lines
from xmine.io.corpus import DEFAULT_MAX_CHARS, CorpusStats, iter_lines
from xmine.errors import InputError

log = logging.getLogger("xmine.io.corpus")


def iter_parallel(
    src_path: str | Path, tgt_path: str | Path, *, max_chars: int = DEFAULT_MAX_CHARS
) -> Iterator[tuple[int, str, str]]:
    """Stream line-aligned parallel files: yield (line_number, src, tgt) for the lines where both
    sides are non-empty. Lines empty on either side are skipped on both (counted in a warning).

    Raises `InputError` naming both files and both line counts when their lengths differ
    (checked before anything is yielded, so a caller never sees half an answer).
    """
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    n_src, n_tgt = count_lines(src_path), count_lines(tgt_path)
    if n_src != n_tgt:
        raise InputError(
            src_path,
            f"parallel files differ in length: {src_path} has {n_src} line(s), {tgt_path} has {n_tgt}",
        )
    s_stats, t_stats = CorpusStats(path=src_path), CorpusStats(path=tgt_path)
    skipped = 0
    for (line_no, s), (_, t) in zip(iter_lines(src_path, stats=s_stats), iter_lines(tgt_path, stats=t_stats)):
        if not s.strip() or not t.strip():
            skipped += 1
            continue
        s_stats.note_line(line_no, s, max_chars)
        t_stats.note_line(line_no, t, max_chars)  # (counts the pairs as its sentences)
        yield line_no, s, t
    if s_stats.sentences == 0:
        raise InputError(src_path, f"no sentence pair with both sides non-empty in {src_path} and {tgt_path}")
    if skipped:
        log.warning(f"{src_path} / {tgt_path}: {skipped} line(s) empty on one or both sides skipped")
    for st in (s_stats, t_stats):
        for message in st.warnings(max_chars):
            if "empty line" not in message:
                log.warning(message)


def read_parallel(
    src_path: str | Path, tgt_path: str | Path, *, max_chars: int = DEFAULT_MAX_CHARS
) -> tuple[list[str], list[str]]:
    """Read line-aligned parallel files into two equally long lists (see `iter_parallel`)."""
    _, src, tgt = zip(*iter_parallel(src_path, tgt_path, max_chars=max_chars))  # (never empty: it raises)
    return list(src), list(tgt)
