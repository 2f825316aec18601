"""BUCC 2018 shared task (parallel sentence spotting in comparable corpora).

Format (as distributed and as LASER's tasks/bucc scripts read it): for pair `{src}-en` and split
`sample` | `training` | `test`, files `{src}-en.{split}.{src}` and `{src}-en.{split}.en` hold
`id<TAB>sentence` per line (ids like `de-000000001`, `en-000000001`), and `{src}-en.{split}.gold`
holds `src-id<TAB>en-id` per gold pair (the test gold was not released with the data; when absent
only the training/sample split is reported). Files may sit in the data dir or in a `{src}-en/`
sub-folder.

Protocol (LASER): mine each split (k=4, ratio margin, max retrieval, unique sentences); on the
training split (or `sample` when there is no `training`) choose the threshold maximising F1
against its gold, then apply that threshold to the test split.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, NamedTuple

import click
import numpy as np

from xmine.artefacts.fileio import read_json
from xmine.benchmarks.common import RESULT_KIND, Variant, default_out, format_table, run_at, safe_name, write_result
from xmine.benchmarks.runner import ENCODER_HELP, encoder_of, variant_tag
from xmine.calibration import DEFAULT_MARGIN
from xmine.io.dedup import dedup
from xmine.store.layout import DEFAULT_DTYPE
from xmine.encoders.embed_cache import cached_encode
from xmine.encoders import load_encoder
from xmine.encoders.options import precision_option
from xmine.errors import ConfigError, DataNotFoundError, InputError
from xmine.mining.calibrate import threshold_sweep
from xmine.mining.cli_options import k_option, margin_option, retrieval_option
from xmine.mining.config import SearchConfig, SelectionConfig, check_k_for_margin
from xmine.options import NAME, GivenPath, projection_option, quiet_option
from xmine.artefacts.outputs import claim_output
from xmine.paths import data_root, resolve_data_dir
from xmine.encoders.projection import choose_projection, resolve_projection

HOW_TO_GET = ("Download the BUCC 2018 data (https://comparable.limsi.fr/bucc2018/bucc2018-task.html): "
              "files like de-en.training.de, de-en.training.en, de-en.training.gold.")


def read_bucc_file(path: Path) -> tuple[list[str], list[str]]:
    """(ids, sentences) of an `id<TAB>sentence` file; InputError names the bad line."""
    ids, sents = [], []
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            line = line.rstrip("\n").rstrip("\r")
            if not line:
                continue
            parts = line.split("\t", 1)
            if len(parts) != 2 or not parts[0]:
                raise InputError(path, "expected `id<TAB>sentence`", line=no)
            ids.append(parts[0])
            sents.append(parts[1])
    return ids, sents


def read_gold(path: Path, ids: tuple[tuple[Path, set[str]], ...] | None = None) -> set[tuple[str, str]]:
    """The gold pairs of a `src-id<TAB>en-id` file; InputError names a bad line. With `ids` (each
    side's sentence file and its ids, source then English), also a line whose id is in no line of
    that side's file
    (was: a gold of other ids scored P 0, R 0, exit 0; one such line among good ones lowered the
    recall without a word)."""
    gold = set()
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if line.strip() and len(parts) != 2:
                raise InputError(path, "expected `src-id<TAB>en-id`", line=no)
            if not line.strip():
                continue
            for (file, known), value in zip(ids or (), parts):
                if value not in known:
                    raise InputError(path, f"id {value[:80]!r} is in no line of {file.name}: a gold of other files?",
                                     line=no)
            gold.add((parts[0], parts[1]))
    return gold


def check_gold_ids(files: dict[str, Path]) -> None:
    """`read_gold` of a split's gold (`files`: `_split_files`'), its ids checked against the split's
    sentence files."""
    read_gold(files["gold"], ids=tuple((files[side], set(read_bucc_file(files[side])[0])) for side in ("src", "en")))


def pairs_in(root: Path) -> list[str]:
    """The language pairs whose training or sample split `root` (or its `{pair}/` folders) holds."""
    names = [p.name for p in [*root.glob("*-en.*.en"), *root.glob("*-en/*-en.*.en")]]
    return sorted({n.split(".")[0] for n in names if n.split(".")[1] in ("training", "sample")})


def _split_files(root: Path, pair: str, split: str) -> dict[str, Path] | None:
    src = pair.split("-")[0]
    for base in (root, root / pair):
        files = {"src": base / f"{pair}.{split}.{src}", "en": base / f"{pair}.{split}.en",
                 "gold": base / f"{pair}.{split}.gold"}
        if files["src"].is_file() and files["en"].is_file():
            return files
    return None


def best_threshold(scores: np.ndarray, correct: np.ndarray, n_gold: int) -> tuple[float, dict]:
    """Threshold maximising F1 when keeping candidates with score >= threshold (LASER's sweep)."""
    if not len(scores):
        return float("inf"), {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    s, prec, rec, f1, cut = threshold_sweep(scores, correct, n_gold)
    i = int(np.argmax(np.where(cut, f1, -1)))
    return float(s[i]), {"precision": float(prec[i]), "recall": float(rec[i]), "f1": float(f1[i])}


def prf_curve(scores, correct, n_gold: int, thresholds) -> dict[str, np.ndarray]:
    """Precision, recall, F1 and pair count of keeping the candidates scoring >= each threshold.

    The same counts as `evaluate` on `{c for c, s in zip(cands, scores) if s >= t}` (candidates are
    distinct pairs), for many thresholds at once.
    """
    scores = np.asarray(scores, np.float64)
    order = np.argsort(scores, kind="stable")
    s, c = scores[order], np.asarray(correct, bool)[order]
    below = np.searchsorted(s, np.asarray(thresholds, np.float64), side="left")  # candidates dropped
    kept = len(s) - below
    tp = c.sum() - np.concatenate([[0], np.cumsum(c)])[below]
    prec = np.where(kept > 0, tp / np.maximum(kept, 1), 0.0)
    rec = tp / max(n_gold, 1)
    f1 = np.where(prec + rec > 0, 2 * prec * rec / np.maximum(prec + rec, 1e-12), 0.0)
    return {"precision": prec, "recall": rec, "f1": f1, "pairs": kept}


def evaluate(pairs: set[tuple[str, str]], gold: set[tuple[str, str]]) -> dict:
    tp = len(pairs & gold)
    p = tp / len(pairs) if pairs else 0.0
    r = tp / len(gold) if gold else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0, "pairs": len(pairs),
            "gold": len(gold)}


class Candidates(NamedTuple):
    """What `mine_candidates` mined of one split."""

    #: every candidate (src-id, en-id), each id carrying a mined sentence
    pairs: list[tuple[str, str]]
    #: their scores (float32 values)
    scores: np.ndarray
    #: the threshold `xmine mine` keeps them at (None: every pair)
    threshold: float | None
    #: the share the threshold's rule read off this run (`mutual_null_share`), None without a rule
    share: float | None


def margin_of(threshold: float | dict | None, margin: str | None = None) -> str:
    """The margin a run scores with: `margin` where given, else the one `xmine mine` would use with
    `threshold` (a `threshold_rule.run_threshold` record says it), else ratio."""
    if margin is not None:
        return margin
    return threshold.get("margin", DEFAULT_MARGIN) if isinstance(threshold, dict) else DEFAULT_MARGIN


def mine_candidates(src: tuple[list[str], list[str]], en: tuple[list[str], list[str]], embed_fn, *, k: int = 4,
                    margin: str | None = None, retrieval: str = "max", threshold: float | dict | None = None,
                    ) -> Candidates:
    """Mine one split given as (ids, sentences) per side; every candidate (src-id, en-id) with its
    score (`margin_of` the threshold), and the threshold `xmine mine` would keep this run's
    candidates at (`run_threshold_of`).

    `embed_fn(sentences) -> (n, dim)` L2-normalised embeddings (raw or a projection's meaning part),
    rounded to the dtype `xmine mine` keeps a text side's rows in (`DEFAULT_DTYPE`): the rounding
    moves a candidate or two, and with them the share the threshold rule reads.
    Shared by `bench bucc` and `bench mining`, so their numbers come from the same code.
    """
    from xmine.mining import MiningConfig, mine_embeddings

    (src_ids, src_sents), (en_ids, en_sents) = src, en
    # Mine on unique sentences; a mined sentence stands for every id carrying it (as LASER does).
    us, inv_s = dedup(src_sents)
    ue, inv_e = dedup(en_sents)
    x, y = (np.asarray(embed_fn(u)).astype(DEFAULT_DTYPE).astype(np.float32) for u in (us, ue))
    mined = mine_embeddings(x, y, config=MiningConfig(k=k, margin=margin_of(threshold, margin), retrieval=retrieval))
    ids_of_s, ids_of_e = [[] for _ in us], [[] for _ in ue]
    for ids_of, ids, inverse in ((ids_of_s, src_ids, inv_s), (ids_of_e, en_ids, inv_e)):
        for i, u in zip(ids, inverse):
            ids_of[u].append(i)
    cands, scores = [], []
    for a, b, sc in zip(mined.src_idx.tolist(), mined.tgt_idx.tolist(), mined.score.tolist()):
        for sid in ids_of_s[a]:
            for eid in ids_of_e[b]:
                cands.append((sid, eid))
                scores.append(sc)
    return Candidates(cands, np.asarray(scores, dtype=np.float64), *run_threshold_of(mined, threshold))


def run_threshold_of(mined, threshold: float | dict | None) -> tuple[float | None, float | None]:
    """The threshold `xmine mine` keeps the candidates `mined` (every one, unique sentences) at, and
    the share its rule read (None where no rule applies): `threshold` a number or None (every pair
    kept) as it is; a `threshold_rule.run_threshold` record, its value, or where it has a rule (the
    run-following rule of a calibrated space, or the estimate of a space without a calibration) the
    value that rule gives this run (`apply_run_threshold`)."""
    if not isinstance(threshold, dict):
        return threshold, None
    if "rule" not in threshold:
        return threshold["value"], None
    from xmine.mining.threshold_rule import apply_run_threshold

    record = dict(threshold)
    apply_run_threshold(mined, record)
    return record["value"], record.get("share")


def at_least(scores, threshold: float | None) -> np.ndarray:
    """Which of `scores` are kept at `threshold` (None: all), compared in float64 as `xmine mine`
    compares (`select_pairs`: "at least this"; was: the threshold cast to float32, which kept a score
    up to half a float32 step below it)."""
    scores = np.asarray(scores, dtype=np.float64)
    return np.ones(len(scores), bool) if threshold is None else scores >= np.float64(threshold)


def bucc_splits(data_dir, pair: str) -> tuple[Path, str, dict[str, Path]]:
    """(the data folder, the split the threshold is tuned on, its files), checked: a DataNotFoundError
    that says what is missing, and which pairs the folder holds."""
    src, _, en = pair.partition("-")
    if not src or en != "en" or any(c in src for c in "/\\."):  # (was: "no training or sample split" for `de`)
        raise ConfigError(f"--pair {pair[:80]!r}: BUCC names a pair SRC-en (de-en, fr-en, ru-en, zh-en)")
    root = resolve_data_dir(data_dir, needs="bucc2018", how_to_get=HOW_TO_GET)
    train_split = next((s for s in ("training", "sample") if _split_files(root, pair, s)), None)
    if train_split is None:
        present = pairs_in(root)
        raise DataNotFoundError(f"BUCC {pair}: no training or sample split in {root}" + (
            f" (it holds {', '.join(present)})" if present else f". {HOW_TO_GET}"))
    tf = _split_files(root, pair, train_split)
    if not tf["gold"].is_file():
        raise DataNotFoundError(f"BUCC {pair}: {tf['gold']} missing (needed to tune the threshold)")
    check_gold_ids(tf)
    test = _split_files(root, pair, "test")
    if test is not None and test["gold"].is_file():
        check_gold_ids(test)
    return root, train_split, tf


def run_bucc(data_dir, *, pair: str = "de-en", encoder="me5-small", projection=None, k: int = 4,
             margin: str | None = None, retrieval: str = "max", precision: str = "auto",
             runtime: str | None = None, prompt: str | None = None, prompt_name: str | None = None,
             device: str | None = None, show_progress: bool = True) -> dict[str, Any]:
    """Mine BUCC's splits, tune the threshold on the training (or sample) gold, score the test split.
    `margin` None: ratio, as `xmine mine` with a threshold that is not the calibrated one.

    `encoder`: an Encoder or a name (loaded at `precision` on `runtime`, on `device`); `projection`: a Projection, a directory,
    or None (raw).
    Returns {"pair", "threshold", "train": {split, precision, recall, f1, ...}, "test": {...} | None,
    "files": the files read}.
    """
    root, train_split, tf = bucc_splits(data_dir, pair)
    margin = margin_of(None, margin)
    if isinstance(encoder, str):
        encoder = load_encoder(encoder, precision=precision, runtime=runtime, prefix=prompt, prompt_name=prompt_name,
                               device=device)
    if projection is not None and not hasattr(projection, "transform"):
        # 'default' / 'none' / a directory, as everywhere (here raw unless a projection is named)
        projection = choose_projection(str(projection), encoder_name=encoder.name,
                                       encoder_fp=encoder.fingerprint).path

    projection = resolve_projection(projection)
    if projection is not None:
        projection.check_encoder(encoder.fingerprint())
    gold = read_gold(tf["gold"])

    def embed(sentences):
        e = cached_encode(encoder, sentences, show_progress=show_progress, desc="encoding")
        return projection.transform(e, "meaning") if projection is not None else e

    def mine_split(files):
        src, en = read_bucc_file(files["src"]), read_bucc_file(files["en"])
        fewest = min(len(set(src[1])), len(set(en[1])))
        if k > fewest:  # (was: k recorded as given, unsaid)
            click.echo(f"-k {k}: a side of {Path(files['src']).parent.name} holds {fewest:,} distinct sentences; "
                       f"a margin is over at most that many neighbours", err=True)
        return mine_candidates(src, en, embed, k=k, margin=margin, retrieval=retrieval)

    cands, scores, _, _ = mine_split(tf)
    correct = np.array([c in gold for c in cands], dtype=bool)
    threshold, _ = best_threshold(scores, correct, len(gold))
    kept = {c for c, s in zip(cands, scores) if s >= threshold}
    result: dict[str, Any] = {
        "pair": pair, "k": k, "margin": margin, "retrieval": retrieval, "threshold": threshold,
        "encoder": encoder.fingerprint(), "projection": projection.fingerprint() if projection is not None else None,
        "train": {"split": train_split, **evaluate(kept, gold)}, "test": None,
        "files": [str(f) for f in tf.values()],
    }
    test = _split_files(root, pair, "test")
    if test is not None and test["gold"].is_file():
        result["files"] += [str(f) for f in test.values()]
        cands, scores, _, _ = mine_split(test)
        result["test"] = {"split": "test", **evaluate({c for c, s in zip(cands, scores) if s >= threshold},
                                                       read_gold(test["gold"]))}
    return result


#: The kind of a result `bench bucc` wrote before it wrote `xmine-benchmark-result`s (`verify` and
#: `bench report` still read one).
BUCC_KIND = "bucc-result"


@click.command("bucc")
@click.option("--data-dir", type=GivenPath(file_okay=False, path_type=Path), default=None,
              help="Folder with the BUCC 2018 files (or a data root holding bucc2018/). Default: $XMINE_DATA/bucc2018, "
                   "else ../shared/data/bucc2018 beside the checkout.")
@click.option("--pair", default="de-en", show_default=True,
              help="Language pair of the folder's files, as BUCC names them: de-en, fr-en, ru-en, zh-en (or the pair "
                   "of sets written in its format, e.g. by `xmine bench mining --sets-dir`).")
@click.option("--encoder", type=NAME, default="me5-small", show_default=True, help=ENCODER_HELP)
@projection_option("to mine in (its meaning part)",
                   default="Default: raw embeddings, as BUCC results are usually reported.")
@k_option(help="Margin neighbourhood size.")
@margin_option(help="Score (see `xmine mine --help`). Default: ratio, LASER's (the threshold is tuned on the gold, "
                    "not calibrated, so no space's calibrated margin applies).")
@retrieval_option(help="Retrieval mode (see `xmine mine --help`).")
@click.option("--out", type=GivenPath(dir_okay=False, path_type=Path), default=None,
              help="Result JSON. Default: benchmarks/results/bucc-<encoder>-<pair>[-<projection>][-<setting>...].json, "
                   "naming the projection and each other setting given (-k, --margin, --retrieval, --precision, ...).")
@click.option("--overwrite", is_flag=True, help="Replace the result JSON if it is an earlier xmine result.")
@precision_option()
@quiet_option(help="No progress bars (the result lines are still printed).")
def command(data_dir, pair, encoder, projection, k, margin, retrieval, out, overwrite, precision, runtime, prompt,
            prompt_name, device, quiet):
    """BUCC 2018: mine, tune the threshold for F1 on the training gold, report precision/recall/F1."""
    started = time.time()
    # as `xmine mine` (was: -k 1 scored every mutual pair alike, a meaningless F1 with exit 0)
    check_k_for_margin(SearchConfig(k=k), SelectionConfig(margin=margin, threshold=None))
    encoder = encoder_of(encoder, [projection] if projection else [], param="encoder")
    named = "" if projection in (None, "none") else "-default" if projection == "default" else f"-{Path(projection).name}"
    # a setting given makes another result, as the other benchmarks name theirs (was: -k, --margin and
    # --retrieval left out, so two settings claimed one name; and "-encoder" appended to the default's)
    named = (safe_name(named) if named else "") + variant_tag(exclude=("pair", "projection"))
    out = out or default_out("bucc", f"{encoder}-{pair}{named}")
    # a result of the `bench bucc` before (its own kind) is replaced as one of this kind (`--overwrite`)
    earlier = (read_json(out) or {}).get("kind") if Path(out).is_file() else None
    with claim_output(out, kind=BUCC_KIND if earlier == BUCC_KIND else RESULT_KIND, form="json", overwrite=overwrite,
                      inputs=[data_root(data_dir), projection]):
        bucc_splits(data_dir, pair)  # (the data checked before the encoder is loaded)
        encoder = load_encoder(encoder, precision=precision, runtime=runtime, prefix=prompt, prompt_name=prompt_name,
                               device=device)
        result = run_bucc(data_dir, pair=pair, encoder=encoder, projection=projection, k=k, margin=margin,
                          retrieval=retrieval, precision=precision, runtime=runtime, prompt=prompt,
                          prompt_name=prompt_name, device=device, show_progress=not quiet)
        rows = []
        for split in ("train", "test"):
            r = result[split]
            if r is not None:
                rows.append([r["split"], *(round(100 * r[m], 1) for m in ("precision", "recall", "f1")),
                             r["pairs"], r["gold"], f"{result['threshold']:.4f}"])  # (a string: the report's digits)
        fp = result["projection"]
        name = "raw" if fp is None else "default:meaning" if fp.get("shipped") else f"{Path(fp['path']).name}:meaning"
        columns = ["split", "P", "R", "F1", "pairs", "gold", "threshold"]
        # a title and a table, as every bench command prints (was: a loose line a split)
        made = encoder.fingerprint()
        click.echo(f"BUCC 2018 {pair}, {name} {result['margin']} margin, threshold tuned for F1 on the training "
                   f"gold (%): {made['name']} at {run_at(made)}",
                   err=True)
        click.echo(format_table(columns, rows))
        if result["test"] is None:
            click.echo(f"(no test gold: the {result['train']['split']} split only)")
        write_result(out, task="bucc", encoder=encoder,
                     variants=[Variant(name, "raw" if fp is None else "meaning", None, fp)],
                     data_files=result["files"], columns=columns,
                     rows=rows, details={name: result}, seconds=time.time() - started, parameters={
                         "data_dir": str(Path(data_dir).absolute()) if data_dir else None, "pair": pair,
                         "projection": str(projection) if projection else None, "k": k, "margin": result["margin"],
                         "retrieval": retrieval, "encoder_precision": result["encoder"].get("precision")})
    click.echo(f"wrote {out}", err=True)
