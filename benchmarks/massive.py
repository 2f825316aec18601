"""MASSIVE cross-lingual retrieval (FitzGerald et al. 2022), as in FMDA's Table 2.

MASSIVE 1.1's release is a folder `data/` with one `<locale>.jsonl` per locale (en-US, de-DE,
...); each line is a JSON object with `id`, `locale`, `partition` (train/dev/test), `utt`,
`annot_utt`, `intent`, `scenario`, ... Utterances with the same `id` are translations of each
other. The test split has 2,974 utterances per locale.

Task (FMDA, section 4.3.1): for each source-locale test utterance (query), find its translation
among all target-locale test utterances by cosine; the metric is accuracy@1 (%). Only ids present
in both locales count (all of them in the real release).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence


from xmine.benchmarks.common import EmbedFn, cosine_matrix, mean_of, retrieval_accuracy
from xmine.errors import ConfigError, DataNotFoundError, InputError
from xmine.paths import resolve_data_dir

NEEDS = "massive"
HOW_TO_GET = (
    "Download MASSIVE 1.1 (https://github.com/alexa/massive: amazon-massive-dataset-1.1.tar.gz) "
    "and unpack it so that massive/ holds data/<locale>.jsonl (or 1.1/data/<locale>.jsonl)."
)
#: FMDA's pairs
DEFAULT_PAIRS = (("en-US", "de-DE"), ("de-DE", "en-US"), ("en-US", "es-ES"), ("es-ES", "en-US"),
                 ("en-US", "ja-JP"), ("ja-JP", "en-US"))
QUICK_ROWS = 300


def locate(data_dir: str | Path | None) -> Path:
    """The folder holding `<locale>.jsonl` files: accepts the root, massive/, 1.1/ or data/."""
    base = resolve_data_dir(data_dir, needs=NEEDS, how_to_get=HOW_TO_GET)
    for c in (base, base / "data", base / "1.1" / "data"):
        if any(c.glob("*.jsonl")):
            return c
    raise DataNotFoundError(f"{base}: no MASSIVE <locale>.jsonl files there or in data/ or 1.1/data/. {HOW_TO_GET}")


def available_locales(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.jsonl"))


def load_locale(folder: str | Path, locale: str, *, partition: str = "test") -> dict[str, str]:
    """{id: utt} of one locale's `partition`; errors name the file, line and problem."""
    path = Path(folder) / f"{locale}.jsonl"
    if not path.is_file():
        raise InputError(path, f"missing MASSIVE file for locale {locale!r}")
    out: dict[str, str] = {}
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(path, f"not a JSON object ({e.msg})", line=line_no) from None
            if not isinstance(rec, dict):
                raise InputError(path, "not a JSON object", line=line_no)
            missing = [k for k in ("id", "partition", "utt") if k not in rec]
            if missing:
                raise InputError(path, f"record lacks field(s) {', '.join(missing)}", line=line_no)
            if rec.get("locale", locale) != locale:
                raise InputError(path, f"record has locale {rec['locale']!r} in the file of {locale!r}", line=line_no)
            if rec["partition"] != partition:
                continue
            key = str(rec["id"])
            if key in out:
                raise InputError(path, f"duplicate id {key!r} in partition {partition}", line=line_no)
            out[key] = str(rec["utt"])
    if not out:
        raise InputError(path, f"no utterances in partition {partition!r}")
    return out


def parse_pairs(spec: str | None, locales: Sequence[str]) -> list[tuple[str, str]]:
    """'en-US:de-DE,de-DE:en-US' -> pairs; 'all' -> every locale vs en-US both ways; None -> FMDA's."""
    if not spec:
        return [p for p in DEFAULT_PAIRS if p[0] in locales and p[1] in locales] or [
            p for loc in locales if loc != "en-US" for p in (("en-US", loc), (loc, "en-US"))
        ]
    if spec == "all":
        return [p for loc in locales if loc != "en-US" for p in (("en-US", loc), (loc, "en-US"))]
    pairs = []
    for item in spec.split(","):
        parts = item.strip().split(":")
        if len(parts) != 2 or not all(parts):
            raise ConfigError(f"--pairs: {item!r} is not SRC:TGT (e.g. en-US:de-DE)")
        pairs.append((parts[0], parts[1]))
    return pairs


def evaluate_massive(
    embed_fn: EmbedFn,
    data_dir: str | Path | None = None,
    pairs: Sequence[tuple[str, str]] | str | None = None,
    *,
    partition: str = "test",
    max_rows: int | None = None,
) -> dict[str, Any]:
    """Accuracy@1 (%) of src->tgt retrieval per locale pair, and the average.

    `max_rows` keeps the first N shared ids (sorted numerically when ids are numbers).
    """
    folder = locate(data_dir)
    locales = available_locales(folder)
    if pairs is None or isinstance(pairs, str):
        pairs = parse_pairs(pairs, locales)
    unknown = sorted({loc for p in pairs for loc in p if loc not in locales})
    if unknown:
        raise ConfigError(f"unknown MASSIVE locale(s) {', '.join(unknown)}; {folder} has: {' '.join(locales)}")
    if not pairs:
        raise ConfigError(f"no locale pairs to evaluate in {folder}")
    loaded: dict[str, dict[str, str]] = {}
    per_pair: dict[str, dict[str, float]] = {}
    for src, tgt in pairs:
        for loc in (src, tgt):
            if loc not in loaded:
                loaded[loc] = load_locale(folder, loc, partition=partition)
        ids = sorted(set(loaded[src]) & set(loaded[tgt]), key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))
        if max_rows is not None:
            ids = ids[:max_rows]
        if not ids:
            raise InputError(folder / f"{tgt}.jsonl", f"no {partition} ids shared with {src}.jsonl")
        x = embed_fn([loaded[src][i] for i in ids])
        y = embed_fn([loaded[tgt][i] for i in ids])
        per_pair[f"{src}:{tgt}"] = {"acc": retrieval_accuracy(cosine_matrix(x, y)), "rows": len(ids)}
    return {
        "per_pair": per_pair,
        "average": {"acc": mean_of(r["acc"] for r in per_pair.values())},
        "files": [str(folder / f"{loc}.jsonl") for loc in loaded],
    }


def write_massive_jsonl(path: str | Path, locale: str, records: Sequence[tuple[str, str, str]]) -> None:
    """Write (id, partition, utt) records as a MASSIVE-1.1-format jsonl (for tests and samples).

    Fields follow the release: id, locale, partition, scenario, intent, utt, annot_utt, worker_id.
    """
    with open(path, "w", encoding="utf-8") as f:
        for rid, part, utt in records:
            rec = {"id": rid, "locale": locale, "partition": part, "scenario": "general", "intent": "general_quirky",
                   "utt": utt, "annot_utt": utt, "worker_id": "0"}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")

