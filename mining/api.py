"""xmine from Python: `mine`, `score` and `embed` over lists of strings, files or stores, with the
defaults and filters of the command line (docs/api.md).

`mine` and `score` run the commands' own code (`xmine.mining.pipeline.mine`,
`xmine.mining.score.score_bitext`) into a temporary directory and return the result as a
`pyarrow.Table`, which `datasets.Dataset(table)` turns into a dataset and `table.to_pylist()` into
dicts; the command's summary (threshold and where it came from, filter counts, provenance) is in
the table's schema metadata under b"xmine" (`summary(table)`). A list of strings stands for a
corpus, one sentence an item (line breaks inside an item become spaces, as in a text file); the
result then names each sentence by its 0-based position in the list (`src_index`, `tgt_index`)
instead of a file and line. Everything heavy is imported when a function is called.

Like the command line (xmine/cli.py), this module is a composition root: it registers the feature
packages' artefact readers with the core.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Sequence

from xmine.artefacts import register_readers
from xmine.disentangle.projection import load_projection
from xmine.index.faiss_index import IndexDir

register_readers(projection=load_projection, index=IndexDir.open)

Source = str | Path | Sequence[str]
#: the schema metadata key that holds a result's summary
SUMMARY_KEY = b"xmine"


def _corpus(value: Source, directory: Path, name: str) -> tuple[Path, bool]:
    """A path to mine or score: the value itself, or a list of strings written one a line."""
    from xmine.stdin import is_url

    if is_url(value):  # an fsspec URL, kept as the string it is (`mine` copies it as it streams)
        return value, False
    if isinstance(value, (str, Path)):
        return Path(value), False
    if not all(isinstance(s, str) for s in value):
        raise TypeError(f"{name}: expected a path or a sequence of strings")
    path = directory / f"{name}.txt"
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for text in value:
            f.write(" ".join(text.splitlines()) + "\n")
    return path, True


def _table(path: Path, summary: dict, lists: dict[str, bool]):
    """The result file as a pyarrow Table with the summary in its metadata; positions for list inputs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    for side, was_list in lists.items():
        if was_list and f"{side}_record" in table.column_names:
            index = pa.compute.subtract(table[f"{side}_record"], 1)
            at = table.column_names.index(f"{side}_file")
            table = table.drop_columns([f"{side}_file", f"{side}_record"]).add_column(at, f"{side}_index", index)
    meta = {**(table.schema.metadata or {}), SUMMARY_KEY: json.dumps(summary, default=str).encode()}
    return table.replace_schema_metadata(meta)


def _operating_point(threshold, operating_point: str | None) -> str:
    """The operating point of the calibrated default; ValueError for one that is not, or with a
    threshold that is not the default (the command's usage error)."""
    from xmine.mining.defaults import DEFAULT_OPERATING_POINT, OPERATING_POINTS

    if operating_point is None:
        return DEFAULT_OPERATING_POINT
    if operating_point not in OPERATING_POINTS:
        raise ValueError(f"operating_point: one of {', '.join(OPERATING_POINTS)}, not {operating_point!r}")
    if threshold != "default":
        raise ValueError("give a threshold or an operating_point, not both")
    return operating_point


def summary(table) -> dict[str, Any]:
    """The summary `mine` or `score` attached to their result (what the command writes to OUT.json)."""
    return json.loads(table.schema.metadata[SUMMARY_KEY])


def mine(src: Source, tgt: Source, *, src_lang: str | None = None, tgt_lang: str | None = None,
         threshold: float | str | None = "default", k: int = 4, margin: str = "ratio", retrieval: str = "max",
         encoder: str | None = None, projection: str | Path | None = None, filters: bool = True,
         lang_filter: bool | None = None, pre_clean: bool = True, approximate: bool = False,
         keep_fields: Sequence[str] = (), operating_point: str | None = None,
         calibration: str | Path | None = None, show_progress: bool = False):
    """Mine `src` against `tgt` as `xmine mine` does; a pyarrow Table, best pair first.

    `src`, `tgt`: lists of sentences, or what the command takes (a corpus file or its fsspec URL,
    a dataset folder, an embedding store, an index). `threshold`: "default" (the command's default: the calibrated
    threshold of the shipped projection), None (keep every pair) or a number. `operating_point`:
    "balanced" (the default) or "precision", which calibrated threshold "default" means;
    `calibration`: a record of `xmine calibrate` whose thresholds and cap are the defaults
    (as --operating-point and --calibration). `filters`,
    `lang_filter`, `pre_clean`: the command's pair filters, language filter and pre-search
    cleaning (their defaults are the command's); `keep_fields`: record fields to carry (files
    with fields only, as --keep-field). Columns: `translation` (a dict keyed by the two
    language codes), `score`, `direction`, where each sentence came from (`src_index` for a list,
    else `src_file` and `src_record`; the same for tgt), and the language filter's `*_lid` columns.
    """
    from xmine.mining.filters import PairFilterConfig
    from xmine.mining.pipeline import mine as run_mine
    from xmine.mining.presearch import PreSearchConfig
    from xmine.mining.select import MiningConfig

    point = _operating_point(threshold, operating_point)
    with tempfile.TemporaryDirectory(prefix="xmine-api-") as tmp:
        d = Path(tmp)
        src_path, src_list = _corpus(src, d, "src")
        tgt_path, tgt_list = _corpus(tgt, d, "tgt")
        config = MiningConfig(k=k, margin=margin, retrieval=retrieval,
                              threshold=threshold if isinstance(threshold, (int, float)) else None)
        result = run_mine(src_path, tgt_path, out=d / "mined.parquet", src_lang=src_lang, tgt_lang=tgt_lang,
                          config=config, encoder=encoder, projection=projection, approximate=approximate,
                          default_threshold=threshold == "default", show_progress=show_progress,
                          output_format="parquet", filters=PairFilterConfig(enabled=filters),
                          lang_filter=lang_filter, pre_clean=PreSearchConfig(enabled=pre_clean),
                          keep_fields=keep_fields, operating_point=point, calibration=calibration)
        return _table(d / "mined.parquet", result, {"src": src_list, "tgt": tgt_list})


def score(src: Source, tgt: Source | None = None, *, src_lang: str | None = None, tgt_lang: str | None = None,
          threshold: float | str | None = "default", k: int = 4, margin: str = "ratio",
          encoder: str | None = None, projection: str | Path | None = None, filters: bool = True,
          kept_only: bool = False, operating_point: str | None = None, calibration: str | Path | None = None,
          show_progress: bool = False):
    """Score the pairs (src[i], tgt[i]) as `xmine score` does; a pyarrow Table in their order.

    `src`, `tgt`: two lists of sentences of the same length, or two line-aligned files (a Moses
    pair); or `src` alone: a bitext file or dataset folder `xmine score` reads (TSV, CSV, JSON
    Lines, Parquet, dataset). Columns: the pair's `src` and `tgt` (a bitext file: its own
    fields), `cosine`, `margin`, `keep` and `rule` (the rule that dropped the pair, "" if kept).
    `threshold`, `operating_point`, `calibration`: as for `mine`.
    """
    from xmine.mining.bitext import Bitext
    from xmine.mining.filters import PairFilterConfig
    from xmine.mining.score import score_bitext
    from xmine.mining.select import MiningConfig

    point = _operating_point(threshold, operating_point)
    if tgt is not None and not isinstance(src, (str, Path)) and len(src) != len(tgt):
        raise ValueError(f"{len(src)} source and {len(tgt)} target sentences: pairs need as many of each")
    with tempfile.TemporaryDirectory(prefix="xmine-api-") as tmp:
        d = Path(tmp)
        paths = (Path(src),) if tgt is None else (_corpus(src, d, "src")[0], _corpus(tgt, d, "tgt")[0])
        config = MiningConfig(k=k, margin=margin,
                              threshold=threshold if isinstance(threshold, (int, float)) else None)
        result = score_bitext(Bitext(paths, langs=(src_lang, tgt_lang)), out=d / "scored.parquet",
                              src_lang=src_lang, tgt_lang=tgt_lang, config=config, encoder=encoder,
                              projection=projection, default_threshold=threshold == "default",
                              operating_point=point, calibration=calibration,
                              filters=PairFilterConfig(enabled=filters), kept_only=kept_only,
                              output_format="parquet", show_progress=show_progress)
        return _table(d / "scored.parquet", result, {})


def embed(texts: Sequence[str], *, lang: str | None = None, encoder: str | None = None,
          projection: str | Path | None = None, precision: str = "auto", batch_size: int = 64):
    """The vectors `mine` compares for `texts`: a float32 numpy array (len(texts), dim), rows of
    unit length. By default the meaning part of the shipped projection of the default encoder
    (the space `xmine mine` searches); `projection="none"`: the encoder's raw embeddings."""
    import numpy as np

    from xmine.encoders import DEFAULT_ENCODER, load_encoder
    from xmine.projection import choose_projection, resolve_projection

    name = encoder or DEFAULT_ENCODER
    model = load_encoder(name, precision=precision)
    choice = choose_projection(projection, encoder_name=name, encoder_fp=model.fingerprint)
    emb = np.asarray(model.encode(list(texts), batch_size=batch_size), dtype=np.float32)
    if choice.path is not None:
        emb = resolve_projection(choice.path).transform(emb, "meaning", lang=lang)
    return emb


__all__ = ["SUMMARY_KEY", "embed", "mine", "score", "summary"]
