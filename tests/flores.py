"""FLORES-200 devtest lines for tests that compare encoders across scripts."""

from __future__ import annotations

from pathlib import Path

#: one language per script family the encoder must handle
SCRIPTS = ("eng_Latn", "deu_Latn", "rus_Cyrl", "zho_Hans", "arb_Arab", "hin_Deva", "jpn_Jpan", "kor_Hang")


def flores_lines(data_dir: Path, code: str, n: int, start: int = 0) -> list[str]:
    """Lines start..start+n of `code`'s devtest file."""
    path = Path(data_dir) / "parallel" / "flores200" / "devtest" / f"{code}.devtest"
    return path.read_text(encoding="utf-8").splitlines()[start:start + n]
