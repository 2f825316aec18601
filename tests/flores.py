"""FLORES-200 devtest lines for tests, through the package's one reader."""

from __future__ import annotations

from pathlib import Path

from xmine.benchmarks.common import FLORES_DEVTEST
from xmine.benchmarks.common import flores_lines as _devtest_lines

#: one language per script family the encoder must handle
SCRIPTS = ("eng_Latn", "deu_Latn", "rus_Cyrl", "zho_Hans", "arb_Arab", "hin_Deva", "jpn_Jpan", "kor_Hang")


def flores_lines(data_dir: Path, code: str, n: int | None = None, start: int = 0) -> list[str]:
    """Lines start..start+n (n None: to the end) of `code`'s devtest file under the data root."""
    lines = _devtest_lines(Path(data_dir) / FLORES_DEVTEST, code)
    return lines[start:None if n is None else start + n]
