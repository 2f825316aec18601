"""Measuring the mining thresholds of a space xmine has no calibration for (`xmine calibrate`,
whose command is in `mining/cli.py`), and reading the record back (`read_calibration`).

Each space has its own margin scale (docs/mining.md, "Default thresholds"), and xmine ships
calibrated values only for its own spaces. For any other encoder, or a projection a user trained,
this command measures them on translations it can check: FLORES-200 devtest for the user's
language pair (from the data folder), or line-aligned gold pairs the user gives.

The set is built as the shipped calibration's (gold among distractors of its language and domain),
seeded: a fifth of the pairs are the gold; the source sides of two fifths and the target sides of
the other two are the distractors (none has its translation on the other side), so each side
holds 3/5 of the pairs, a third gold. Mined exactly (k neighbours, max retrieval, no threshold), for
each margin the record holds:
- `balanced`: the threshold of the best F1;
- `precision`: the lowest threshold at which precision is at least 0.95, and not below `balanced`
  (absent if precision never reaches 0.95);
- the `score_max` cap: twice as far from the margin's neutral score (`NEUTRAL`: 1 ratio, 0 distance)
  as the highest margin of a gold pair, rounded up to 0.01 (`score_cap`, the shipped calibration's
  rule: far above the translations, where copies and boilerplate score).
The record names the margin `xmine mine --calibration RECORD` mines in (`default_margin`:
`CALIBRATED_MARGIN`, distance); mine refuses a record of another encoder, projection or k.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from xmine.artefacts.directory import file_fingerprint, provenance
from xmine.artefacts.fileio import unseal
from xmine.artefacts.records import EncoderId, ProjectionFingerprint
from xmine.calibration import (CALIBRATION_DAMAGED_ADVICE, CALIBRATION_KIND, DEFAULT_MARGIN, NEUTRAL, SpaceDefaults,
                               parse_defaults)
from xmine.encoders import load_encoder
from xmine.encoders.base import DEFAULT_PRECISION, EncoderConfig
from xmine.encoders.exported import exported_space
from xmine.encoders.loader import known_encoder_name
from xmine.errors import ConfigError, InputError
from xmine.io.corpus import copies_among, read_parallel
from xmine.langs import is_known_lang, lang_script, normalize_lang, same_language
from xmine.encoders.projection import (choose_projection, read_projection_json, resolve_projection, unseen_languages,
                                      unseen_languages_note)

log = logging.getLogger(__name__)

#: aligned pairs needed: a fifth of them are the gold, and a set needs >= 100 gold pairs
MIN_PAIRS = 500
PRECISION_POINT = 0.95
#: a margin's score cap is this many times as far above its NEUTRAL score as the highest gold pair's margin
CAP_FACTOR = 2.0
#: the margin a record's thresholds are mined in: a FLORES-200 set's best-F1 threshold transfers to
#: the language's other corpora better in distance than in ratio in every space measured (chosen:
#: benchmarks/results/threshold-calibrate-margin.json; reported: heldout-news.json, "calibrated"); the
#: ratio margin's scale follows the density of a corpus's neighbourhoods, the distance margin's less.
CALIBRATED_MARGIN = "distance"


def score_cap(gold_max: float, margin: str = "ratio") -> float:
    """The `score_max` of a space whose highest gold `margin` score is `gold_max`, rounded up to 0.01
    (the rule of the shipped calibration too, `benchmarks/lab/calibrate_defaults.py`)."""
    neutral = NEUTRAL[margin]
    return float(np.ceil((neutral + CAP_FACTOR * (gold_max - neutral)) * 100) / 100)


def threshold_sweep(scores: np.ndarray, correct: np.ndarray, n_gold: int):
    """Precision, recall and F1 of keeping the candidates scoring >= each candidate's score (LASER's
    sweep): (scores best first, precision, recall, f1, cut), `cut` marking the last of each run of
    equal scores (a threshold keeps all of a tie, so only there can a cut be made)."""
    order = np.argsort(-scores, kind="stable")
    s, c = scores[order], np.asarray(correct)[order].astype(np.int64)
    tp = np.cumsum(c)
    precision, recall = tp / np.arange(1, len(s) + 1), tp / max(n_gold, 1)
    f1 = np.where(precision + recall > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-12), 0)
    return s, precision, recall, f1, np.append(s[1:] != s[:-1], True)


#: macrolanguages FLORES-200 holds one member of, which their ISO 639-1 codes name: Latvian (lv) is
#: its lvs_Latn, Albanian (sq) als_Latn, Mongolian (mn) khk_Cyrl, and so on
_FLORES_MEMBER = {"lav": "lvs", "sqi": "als", "mon": "khk", "mlg": "plt", "ori": "ory", "orm": "gaz", "que": "quy",
                  "yid": "ydd", "aym": "ayr", "kau": "knc"}


def flores_file(flores_dir: Path, lang: str, *, option: str = "--src-lang/--tgt-lang", other: str = "") -> Path:
    """The FLORES-200 devtest file of `lang`: a FLORES code (`deu_Latn`) as it is, else the one
    file of its ISO 639-3 language (an error naming `option` and the candidates when there are several,
    and `other`, what else the command takes)."""
    if (flores_dir / f"{lang}.devtest").is_file():
        return flores_dir / f"{lang}.devtest"
    if not any(flores_dir.glob("*.devtest")):  # (was: "no FLORES-200 file of 'fr'" for `--data-dir /tmp`)
        raise ConfigError(f"{flores_dir}: holds no FLORES-200 devtest file (*.devtest): --data-dir names the data "
                          "root (holding parallel/flores200/devtest) or that folder itself")
    # (by `same_language`: was the ISO 639-3 code as the file's prefix, so "zh" (cmn) and "ar" (ara)
    # found no file of FLORES's zho_Hans and arb_Arab)
    code = _FLORES_MEMBER.get(normalize_lang(lang))
    code = code + (f"_{lang_script(lang)}" if lang_script(lang) else "") if code else lang
    found = sorted(p for p in flores_dir.glob("*_*.devtest") if same_language(code, p.stem))
    if not found:  # (an unknown code, or a language FLORES-200 does not hold)
        what = "a language FLORES-200 holds" if is_known_lang(lang) else "a language code"
        raise ConfigError(f"{option} {lang!r}: no FLORES-200 file of it in {flores_dir}; give {what} "
                          f"(e.g. deu_Latn or de){other}")
    if len(found) > 1:
        raise ConfigError(f"{option} {lang!r}: {len(found)} FLORES-200 files match in {flores_dir} "
                          f"({', '.join(p.stem for p in found)}); give a FLORES code (e.g. deu_Latn){other}")
    return found[0]


def read_aligned(src: Path, tgt: Path) -> list[tuple[str, str]]:
    """Line-aligned pairs of two files, both sides non-empty, read as every corpus is
    (`xmine.io.corpus.read_parallel`: compressed files, one-line errors for bytes that are not
    UTF-8, a line break inside a line made a space; was: `splitlines`, a traceback for latin-1 and
    the pairs moved by a U+2028); an error when the line counts differ, or when the two are one
    file (FLORES-200 has one text per language: a pair of one language with itself names the same
    file), whose pairs would be each sentence with itself."""
    if src.resolve() == tgt.resolve():
        raise InputError(tgt, f"the same file as the source side ({src}): calibration measures how translations "
                              "score, and each pair would be a sentence with itself; give two languages' files")
    return list(zip(*read_parallel(src, tgt)))


#: below this best F1 on its own gold, a record is of a space that does not align the pair (FLORES-200 de-en: >= 0.9)
WEAK_CALIBRATION_F1 = 0.5


def trained_on(projection_dir, inputs) -> list[str]:
    """Those of the files `inputs` the projection at `projection_dir` (None: raw) was trained on, by
    the sha256 of its config's training files and a shipped one's source files (was: unsaid for
    those): thresholds measured on its own training pairs are optimistic (they score higher)."""
    if projection_dir is None:
        return []
    files = (read_projection_json(projection_dir, "config.json").get("training_data") or {}).get("files") or []
    seen = {f.get(key) for f in files if isinstance(f, dict) for key in ("src_sha256", "tgt_sha256")}
    if (Path(projection_dir) / "SHIPPED.json").is_file():
        drawn = read_projection_json(projection_dir, "SHIPPED.json").get("source_files") or []
        seen |= {f.get("sha256") for f in drawn if isinstance(f, dict)}
    return [str(p) for p in inputs if file_fingerprint(p)["sha256"] in seen]


def usable_pairs(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The distinct pairs of `pairs` a calibration set is made of, checked: refused (ConfigError)
    with fewer than `MIN_PAIRS`, or with too many of them the same text on both sides
    (`xmine.io.corpus.copies_among`). Pairs that share their source or their target with another are left out, with a
    warning: one of them would count as a false pair."""
    given = len(pairs)
    pairs = list(dict.fromkeys(pairs))  # a repeated pair would be two gold rows for one sentence
    sources, targets = Counter(s for s, _ in pairs), Counter(t for _, t in pairs)
    shared = [(s, t) for s, t in pairs if sources[s] > 1 or targets[t] > 1]
    if shared:  # (was: 200 sentences given a second, wrong, translation calibrated at P 0.5, exit 0)
        log.warning(f"{len(shared)} of the {len(pairs)} distinct pairs share their source or their target with another "
                    "pair (a sentence given two translations): left out, as one-to-one mining keeps one pair a "
                    f"sentence (e.g. {shared[0][0][:60]!r})")
        pairs = [p for p in pairs if sources[p[0]] == 1 and targets[p[1]] == 1]
    if len(pairs) < MIN_PAIRS:
        repeated = (f" ({given - len(pairs)} of the {given} repeat another pair or share a sentence with one)"
                    if given > len(pairs) else "")
        raise ConfigError(f"calibration needs at least {MIN_PAIRS} distinct aligned pairs (a fifth of them, >= 100, "
                          f"are the gold); got {len(pairs)}{repeated}")
    if (identical := copies_among(pairs)) is not None:
        raise ConfigError(f"{identical} of the {len(pairs)} pairs have the same text on both sides: not translations "
                          "(a copy of one side?); calibration measures how translations score")
    return pairs


def split_set(pairs: list[tuple[str, str]], seed: int = 0):
    """(source sentences, target sentences, gold (src_row, tgt_row) set) of the `usable_pairs`: a
    fifth of them hidden among the source sides of two fifths and the target sides of the other two."""
    pairs = usable_pairs(pairs)
    random.Random(seed).shuffle(pairs)
    g = len(pairs) // 5
    rest = pairs[g:]
    src = [s for s, _ in pairs[:g]] + [s for s, _ in rest[: len(rest) // 2]]
    tgt = [t for _, t in pairs[:g]] + [t for _, t in rest[len(rest) // 2:]]
    order_s, order_t = random.Random(seed + 1).sample(range(len(src)), len(src)), \
        random.Random(seed + 2).sample(range(len(tgt)), len(tgt))
    where_s, where_t = {o: i for i, o in enumerate(order_s)}, {o: i for i, o in enumerate(order_t)}
    return [src[o] for o in order_s], [tgt[o] for o in order_t], {(where_s[i], where_t[i]) for i in range(g)}


def operating_points(scores: np.ndarray, correct: np.ndarray, n_gold: int, *,
                     lowest: float = -np.inf) -> dict[str, Any]:
    """From the mined pairs' scores and whether each is gold: the best-F1 threshold and the lowest
    threshold of precision >= 0.95, with precision, recall and F1 at each, neither below `lowest`
    (a margin's NEUTRAL score: was a distance threshold of -0.05 for a space that does not align the
    pair, which mine took from the record and refuses as --threshold); none when nothing was mined,
    or no gold pair scores at or above `lowest`."""
    if not len(scores):
        return {}
    s, precision, recall, f1, cut = threshold_sweep(scores, correct, n_gold)
    cut &= s >= lowest
    if not cut.any():
        return {}

    def at(i: int) -> dict[str, float]:
        return {"threshold": float(s[i]), "precision": round(float(precision[i]), 4),
                "recall": round(float(recall[i]), 4), "f1": round(float(f1[i]), 4)}

    best = int(np.argmax(np.where(cut, f1, -1)))
    if f1[best] <= 0:  # only wrong pairs at or above `lowest` (a regression pass: a threshold of F1 0 recorded)
        return {}
    points = {"balanced": at(best)}
    ok = np.flatnonzero(cut & (precision >= PRECISION_POINT))
    if len(ok):  # never below the balanced point: where that is precise enough already, it is both
        points["precision"] = at(min(int(ok[-1]), best))
    return points


def calibrate(pairs: list[tuple[str, str]], *, encoder: str, projection, src_lang: str, tgt_lang: str,
              k: int = 4, data: dict, seed: int = 0, encode=None,
              encoder_config: EncoderConfig | None = None, show_progress: bool = False) -> dict[str, Any]:
    """The calibration record of the space (encoder, projection) measured on `pairs`. `encode`:
    texts -> the encoder's embeddings, where a caller has its own (a cache); default the encoder's,
    loaded with `encoder_config`'s precision, runtime and prompt (default: the encoder's own), with a
    progress bar where `show_progress`."""
    from xmine.mining.knn import exact_knn_both
    from xmine.mining.select import MiningConfig, select_pairs

    if k < 2:  # (a pair's one neighbour is its partner: every margin at most an ordinary pair's, mine's refusal)
        raise ConfigError(f"-k {k}: the record's margins need k >= 2 (a pair's one neighbour is the pair itself, so "
                          "no margin rises above an ordinary pair's); 4 is LASER's and xmine mine's")
    src, tgt, gold = split_set(pairs, seed)
    if k > min(len(src), len(tgt)):  # every margin's neighbourhood would be a whole side
        raise ConfigError(f"-k {k}: the calibration set holds {len(src)} source and {len(tgt)} target sentences, "
                          f"fewer than k; a margin needs k neighbours among them (use a smaller -k, or more --gold "
                          "pairs)")
    cfg = encoder_config or EncoderConfig()
    model = load_encoder(encoder, precision=cfg.precision or DEFAULT_PRECISION, runtime=cfg.runtime, device=cfg.device,
                         prefix=cfg.prompt, prompt_name=cfg.prompt_name)
    choice = choose_projection(projection, encoder_name=encoder, encoder_fp=model.fingerprint)
    proj = resolve_projection(choice.path) if choice.path is not None else None
    if proj is not None:  # another encoder, prompt or prefix: refused before anything is encoded, as embed's and mine's
        proj.check_encoder(model.fingerprint())
    if unseen := unseen_languages(ProjectionFingerprint.from_dict(proj.fingerprint(), where="projection")
                                  if proj is not None else None, (src_lang, tgt_lang)):  # (was: unsaid, mine warns)
        log.warning(f"{unseen_languages_note(choice.path, unseen)}, and so are thresholds measured in it; "
                    f"`xmine bench tatoeba --projection {choice.path}` measures it")
    encode = encode or functools.partial(model.encode, show_progress=show_progress)
    sides = [np.asarray(encode(texts), dtype=np.float32) for texts in (src, tgt)]
    language_check = _check_languages(proj, sides, (src, tgt), (src_lang, tgt_lang))
    if proj is not None:  # the space mined in: the projection's meaning part
        sides = [proj.transform(emb, "meaning", lang=lang) for emb, lang in zip(sides, (src_lang, tgt_lang))]
    neighbours = exact_knn_both(*sides, k)
    points, measured, cap = {}, {}, {}
    for margin in ("ratio", "distance"):
        mined = select_pairs(*neighbours, config=MiningConfig(k=k, margin=margin))
        correct = np.array([p in gold for p in zip(mined.src_idx.tolist(), mined.tgt_idx.tolist())])
        found = operating_points(mined.score.astype(np.float64), correct, len(gold), lowest=NEUTRAL[margin])
        measured[margin] = found
        for point, values in found.items():
            points.setdefault(point, {})[margin] = values["threshold"]
        if correct.any():
            cap[margin] = score_cap(float(mined.score[correct].max()), margin)
    margin = {"default_margin": CALIBRATED_MARGIN} if CALIBRATED_MARGIN in points.get("balanced", {}) else {}
    return {
        "kind": CALIBRATION_KIND, "format_version": 1,
        "space": {"encoder": encoder, "projection": str(choice.path) if choice.path else None,
                  "projection_weights_sha256": proj.config["weights_sha256"] if proj is not None else None},
        "encoder_fingerprint": model.fingerprint(),
        **margin, "operating_points": points, "score_max": cap,
        "measured": measured,
        "data": {**data, "gold_pairs": len(gold), "src_sentences": len(src), "tgt_sentences": len(tgt),
                 "src_lang": src_lang, "tgt_lang": tgt_lang, "seed": seed, "k": k, "language_check": language_check},
        "provenance": provenance(encoder=encoder, projection=str(choice.path) if choice.path else None,
                                 src_lang=src_lang, tgt_lang=tgt_lang, k=k, seed=seed),
    }


def _check_languages(proj, sides, texts, langs) -> dict[str, Any]:
    """{role: `check_declared`'s record} of a sample of each side's embeddings, as `xmine mine` checks
    its sides, warning where one looks like another language than declared (was: German gold
    pairs given as French made an "fr-en" record without a word). {} where the space identifies no
    language (raw embeddings, a token-level projection)."""
    from xmine.mining.filter_step import SAMPLE_ROWS, check_declared

    if proj is None or not hasattr(proj, "identify") or getattr(proj, "token_level", False):
        return {}
    table, out = proj.trust_table(), {}
    for role, emb, sentences, lang in zip(("src", "tgt"), sides, texts, langs):
        # (the sentences too, as mine's check gives them: a line without a letter names no language)
        labels, _, _ = proj.identify(emb[:SAMPLE_ROWS], sentences[:SAMPLE_ROWS])
        out[role] = record = check_declared(list(labels), lang, table)
        if record["status"] == "mismatch":
            log.warning(f"warning: the {role} side is declared --{role}-lang {lang!r}, but {record['share']:.0%} of "
                        f"{record['sample']} sampled sentences look like {record['looks_like']!r}: the record would "
                        f"hold that language's thresholds under {lang!r} (recorded in data.language_check)")
    return out


def _calibration_record(path: Path, *, unchecked: list[bool] | None = None) -> dict:
    """The JSON object at `path` if it is a record `xmine calibrate` wrote (its values unchecked);
    InputError naming the file when it is unreadable or no such record, DamagedManifestError when
    it no longer matches the checksum it was written with (a threshold edited by hand). A record
    written before records carried the checksum is read as before (`unchecked` gets True)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise InputError(path, f"unreadable calibration record ({e})") from None
    if not isinstance(record, dict) or record.get("kind") != CALIBRATION_KIND or not isinstance(record.get("space"), dict):
        raise InputError(path, "not a calibration record of `xmine calibrate`")
    sealed = unseal(record, path, advice=CALIBRATION_DAMAGED_ADVICE)
    if unchecked is not None:
        unchecked.append(not sealed)
    return record


def check_calibration_record(path: str | Path, *, threshold_k: int | None = None) -> None:
    """Check the record `xmine calibrate` wrote at `path`; InputError naming the file when it is
    unreadable, no such record, its values are malformed, or it was measured at another k than the
    run's `threshold_k` (given where the run takes its threshold). `mine` and `score` call it before
    they claim or encode anything (its space: `check_calibration_space`). A record without its own
    checksum (written before records had one, or edited and the checksum removed) is used, warned."""
    path = Path(path)
    unchecked: list[bool] = []
    found = parse_defaults(_calibration_record(path, unchecked=unchecked), path, "", "")
    if threshold_k is not None and found.k is not None and found.k != threshold_k:
        # the user's choice for this run, so refused (the shipped values only warn: `note_other_k`)
        raise InputError(path, f"measured with k={found.k} neighbours, but this run mines with -k {threshold_k}: its "
                               f"threshold is on another scale; mine with -k {found.k}, calibrate again with -k "
                               f"{threshold_k}, or pass --threshold")
    if unchecked[0]:
        log.warning("%s: records no checksum of its own (written before xmine calibrate recorded one, or edited, "
                    "its checksum removed), so its thresholds are used unchecked; run xmine calibrate again", path)


def calibration_pair_note(path: str | Path, langs: tuple[str | None, str | None]) -> dict | None:
    """Where the record at `path` was measured on another language pair than the run's `langs`
    (both known on both sides; either order): a language note (as `threshold_rule.language_notes`)
    saying so. A record's thresholds are its pair's: another pair's translations may score otherwise."""
    data = _calibration_record(Path(path)).get("data") or {}
    pair = (data.get("src_lang"), data.get("tgt_lang"))
    if not all(isinstance(lang, str) and lang and normalize_lang(lang) != "und" for lang in (*pair, *langs)):
        return None
    if any(all(same_language(a, b) for a, b in zip(pair, order)) for order in (langs, langs[::-1])):
        return None
    run, made = f"{langs[0]}-{langs[1]}", f"{pair[0]}-{pair[1]}"
    return {"language": run, "summary": f"{run}: calibrated on {made}, see above", "note": (
        f"{run}: the calibration record {path} was measured on {made}, not on this run's pair; another pair's "
        "translations may score otherwise (a pair with no English side lower than either language's with English), "
        f"so its threshold may keep too few or too many; `xmine calibrate --src-lang {langs[0]} --tgt-lang {langs[1]}` "
        "measures this pair's own")}


def _model(encoder_id: str | EncoderId) -> str:
    """The model of an encoder id: its weights and pooling, without the prompt, precision or runtime
    (another prompt is noted where the values are used: `threshold_rule.note_other_encoder`)."""
    return (encoder_id if isinstance(encoder_id, EncoderId) else EncoderId.parse(encoder_id)).model


def _same_space(record: dict, encoder_name: str | None, encoder_id, weights: str | None) -> bool:
    """Whether `record` was measured in the space of the encoder (`encoder_name`, its id
    `encoder_id` where known) and the projection of `weights` (its weights' sha256; None: raw).
    The model decides, not the name it was given by (a folder under two paths is one model; another
    model copied under a folder's name is not); an `xmine export-st` folder mined raw is the space of
    the projection it was made of (`exported_space`); a record without the encoder's id is read by name."""
    space, fingerprint = record["space"], record.get("encoder_fingerprint")
    proj_record = (space.get("projection_weights_sha256") or "")[:16] or None
    proj_run = (weights or "")[:16] or None
    model_record = (_model(fingerprint["id"]) if isinstance(fingerprint, dict) and isinstance(fingerprint.get("id"), str)
                    else None)
    model_run = _model(encoder_id) if encoder_id is not None else None
    if model_record and model_run and (model_record, proj_record) == (model_run, proj_run):
        return True
    # an export mined raw, or measured raw: its projection's space, on either side
    if proj_run is None and (export := exported_space(encoder_name)) is not None:
        return (space.get("encoder"), proj_record) == (export.encoder, export.projection_id)
    if proj_record is None and (export := exported_space(space.get("encoder"))) is not None:
        return (export.encoder, export.projection_id) == (encoder_name, proj_run)
    if model_record and model_run:
        return False
    return (known_encoder_name(space.get("encoder")), proj_record) == (known_encoder_name(encoder_name), proj_run)


def check_calibration_space(path: str | Path, *, encoder_name: str | None, projection_dir,
                            encoder_id: str | EncoderId | None = None) -> dict:
    """The record `xmine calibrate` wrote at `path`, where it was measured in the space of the
    encoder (`encoder_name`; `encoder_id`, its fingerprint's id, where known) and `projection_dir`
    (`_same_space`): InputError naming the file when it was measured in another (its thresholds are
    on another scale). `mine` and `score` call it before they encode a side."""
    path = Path(path)
    record = _calibration_record(path)
    space = record["space"]
    weights = (None if projection_dir is None
               else read_projection_json(projection_dir, "config.json").get("weights_sha256"))
    if not _same_space(record, encoder_name, encoder_id, weights):
        made = f"{space.get('encoder')} with " + ("projection " + str(space.get("projection")) if
                                                   space.get("projection_weights_sha256") else "raw embeddings")
        here = f"{encoder_name} with " + (f"projection {projection_dir}" if projection_dir else "raw embeddings")
        if known_encoder_name(space.get("encoder")) == known_encoder_name(encoder_name):
            if space.get("projection_weights_sha256") and weights:
                here += " (another projection's weights, whatever its name)"  # (was: two paths alone, one name)
            elif (space.get("projection_weights_sha256") is None) == (weights is None):
                here += " (another model under that name: its weights differ)"
        raise InputError(path, f"calibrated for {made}, but this run mines {here}")
    return record


def read_calibration(path: str | Path, *, encoder_name: str | None, projection_dir,
                     margin: str = DEFAULT_MARGIN, encoder_id: str | EncoderId | None = None) -> SpaceDefaults:
    """The values of a record `xmine calibrate` wrote, for mining in the space (encoder_name,
    projection_dir); InputError naming the file when it is no record or belongs to another space
    (`check_calibration_space`). `margin`: the margin where the record names none (a record written
    before records named it: the space's calibrated margin, ratio for a space xmine ships no
    calibration for)."""
    path = Path(path)
    record = check_calibration_space(path, encoder_name=encoder_name, projection_dir=projection_dir,
                                     encoder_id=encoder_id)
    data = record.get("data") or {}
    found = parse_defaults(record, path, "", f"measured by xmine calibrate on {data.get('source', '?')} "
                                             f"{data.get('src_lang')}-{data.get('tgt_lang')} ({path})")
    if projection_dir is None and exported_space(encoder_name) is not None:  # (its weights under the export's id:
        found = dataclasses.replace(found, encoder_weights=None)  # not "other embeddings", as `_export_values`)
    if "default_margin" in record or found.threshold(margin, "balanced") is None:
        return found
    return dataclasses.replace(found, margin=margin)
