"""What the summary (OUT.json) of `xmine mine` beside a bitext that is its output says about it:
the languages its sides were given and the space it was mined in, for `xmine score` to judge the
bitext by (`mining.bitext.Bitext.mined_summary` holds the summary read)."""

from __future__ import annotations

import json
from pathlib import Path

from xmine.artefacts.records import EncoderId
from xmine.mining.writers import MINING_KIND, moses_suffixes


def mined_summary(path: Path, fmt: str) -> dict | None:
    """The summary of `xmine mine` where `path` is its output in the format `fmt` (its OUT.json beside
    it says so)."""
    try:
        summary = json.loads(Path(f"{path}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    mined = isinstance(summary, dict) and summary.get("kind") == MINING_KIND and summary.get("format") == fmt
    return summary if mined else None


def mined_moses_summary(paths) -> dict | None:
    """The summary of `xmine mine` where `paths` (source, target) are its Moses files OUT.xx and OUT.yy
    (OUT.json beside them says so), in the order it wrote them (a pair given the other way round is
    none of its: its languages would be swapped)."""
    src, tgt = (Path(p) for p in paths)
    if src.parent != tgt.parent or src.stem != tgt.stem or not src.suffix or not tgt.suffix:
        return None
    summary = mined_summary(src.with_suffix(""), "moses")
    if summary is None or moses_suffixes(*_langs_given(summary)) != (src.suffix, tgt.suffix):
        return None
    return summary


def mined_langs(bitext) -> tuple[str | None, str | None]:
    """The languages the mining run whose output `bitext` is was given for its sides (None each
    where it is no such output, or none was given)."""
    return _langs_given(bitext.mined_summary)


def _langs_given(summary: dict | None) -> tuple[str | None, str | None]:
    """The languages a mining run's summary records as given for its sides (None each where none was)."""
    provenance = (summary or {}).get("provenance")
    given = provenance.get("parameters") if isinstance(provenance, dict) else None
    if not isinstance(given, dict):
        return None, None
    src, tgt = (lang if isinstance(lang, str) and lang else None for lang in (given.get("src_lang"), given.get("tgt_lang")))
    return src, tgt


def mined_in_another_space(bitext, encoder: dict, projection: dict | None) -> str | None:
    """A note where `bitext` is `xmine mine`'s output, mined with another encoder or projection than
    the one it is scored with (`encoder`, `projection`: the scored side's records), else None: its
    margins and threshold are then those of another space (was: said nowhere). Of the same space
    at another precision or runtime, the note says so too: the margins then differ from mine's in
    the fourth decimal, not the fifth (was: unsaid, fp32 mined and bf16 scored 3e-4 apart)."""
    mined = bitext.mined_summary
    if mined is None or not isinstance(mined.get("encoder"), dict) or not isinstance(mined["encoder"].get("name"), str):
        return None  # (a summary without the encoder's name: nothing to compare with, nor to advise)
    made, made_projection = mined["encoder"], mined.get("projection")
    made_id = made_projection.get("id") if isinstance(made_projection, dict) else None
    if made.get("name") == encoder.get("name") and made_id == (projection or {}).get("id"):
        if not (isinstance(made.get("id"), str) and isinstance(encoder.get("id"), str)):
            return None
        # (the id holds the precision and runtime, fp32 on torch where it names none)
        was, now = (EncoderId.parse(rec["id"]) for rec in (made, encoder))
        other = [key for key in ("precision", "runtime") if getattr(was, key) != getattr(now, key)]
        return None if not other else (
            f"{bitext.path} was mined at {' and '.join(f'{key} {getattr(was, key)}' for key in other)}, but is scored "
            f"at {' and '.join(f'{key} {getattr(now, key)}' for key in other)}: its margins differ from mine's by the "
            f"embeddings' rounding; give {' '.join(f'--{key} {getattr(was, key)}' for key in other)} to score it as it "
            "was mined")

    def space(name, proj) -> str:
        return f"encoder {name!r} and " + (f"projection {proj.get('path')}" if isinstance(proj, dict)
                                            else "no projection (raw embeddings)")
    given = f"--encoder {made.get('name')} --projection " + (
        "none" if not isinstance(made_projection, dict) else
        "default" if made_projection.get("shipped") else str(made_projection.get("path")))
    return (f"{bitext.path} was mined with {space(made.get('name'), made_projection)}, but is scored with "
            f"{space(encoder.get('name'), projection)}: its margins and threshold are this space's; give "
            f"{given} to score it in the space it was mined in")


__all__ = ["mined_in_another_space", "mined_langs", "mined_moses_summary", "mined_summary"]
