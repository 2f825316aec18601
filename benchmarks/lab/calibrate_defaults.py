"""`calibrate-defaults`: xmine's default mining thresholds and score caps, per space and margin.

    .venv/bin/python benchmarks/lab/run.py calibrate-defaults embed --encoder me5-small   # resumable
    .venv/bin/python benchmarks/lab/run.py calibrate-defaults embed --encoder use-m3
    .venv/bin/python benchmarks/lab/run.py calibrate-defaults mine                        # kNN lists
    .venv/bin/python benchmarks/lab/run.py calibrate-defaults choose [--install]
    .venv/bin/python benchmarks/lab/run.py calibrate-defaults languages [--install]   # per FLORES-200 language

Sets: `calibration_sets` (four families, 48 sets, >= 100 gold each, 1k to 50k sentences a side).
Spaces: every one xmine ships: raw me5-small, the shipped projection's meaning space (on top of
me5-small) and raw use-m3. Each set is mined exactly in each space (`select_pairs` over exact
kNN lists, k = 4, max retrieval, as `xmine mine`) with every margin, every candidate kept with its
score and whether it is gold.

Choice (`choose_threshold`), per space and margin, on a set of families:
- `balanced` (the default): the threshold with the smallest mean F1 gap to each set's own best F1
  (each family weighing the same), among those whose mean precision is >= `PRECISION_FLOOR` (over
  `PRECISION_FAMILIES`, each weighing the same: not the templated sets, whose labels miss
  paraphrased translations).
  The gap to each set's best, not the F1 itself, so that the hard sets (whose best is low) do not
  decide for the easy ones; the precision floor because a user who gets no gold cannot see recall
  go but sees every false pair they keep.
- `precision`: the lowest threshold whose mean precision (each family weighing the same) is >=
  `PRECISION_TARGET`: the operating point for MT training data, where a false pair costs more than
  a missed one.
Leave one family out: each family is reported at the threshold chosen on the other three; the
shipped value is the one chosen on all four.
Score cap (`score_max`, ratio margin): `CAP_FACTOR` times as far above 1 as the highest gold pair's
ratio margin in any set, so no translation of the calibration sets comes near it, on every
encoder's own scale.

`choose --install` writes the projection's values into its SHIPPED.json (`default_thresholds`,
`operating_points`, `score_max`, `threshold_calibration`) and the raw encoders' into
xmine/mining/calibration.json, which `xmine mine` reads (`xmine.mining.defaults`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
import numpy as np

from xmine.mining.calibrate import CAP_FACTOR, score_cap  # the product's own cap rule

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__import__("os").environ.get("XMINE_DATA", ROOT.parent / "shared" / "data"))
WORK = ROOT / "out" / "calibrate-defaults"
K, KNN = 4, 4
ENCODERS = ("me5-small", "use-m3")
#: space -> (encoder, projection or None)
SPACES = {"projection": ("me5-small", "default"), "raw-me5-small": ("me5-small", None), "raw-use-m3": ("use-m3", None)}
MARGINS = ("ratio", "distance", "absolute")
#: the languages a space is calibrated on, where its encoder does not cover all of the sets': use-m3
#: was trained on 16 languages (the others' sets are near chance whatever the threshold, so they
#: would only tell the calibration how to fail)
USE_M3_LANGUAGES = frozenset({"ara", "cmn", "deu", "eng", "fra", "ita", "jpn", "kor", "nld", "pol", "por", "spa", "tha",
                              "tur", "rus"})
SPACE_LANGUAGES = {"raw-use-m3": USE_M3_LANGUAGES}
PRECISION_FLOOR = 0.85
PRECISION_TARGET = 0.95
#: the families whose precision the floor and the target are measured on: not `templated`, whose
#: MASSIVE utterances repeat one request in other words under other ids ("wann ist angelina jolie's
#: geburtstag" / "when was angelina jolie born"), so that translations count as false pairs there
#: and its precision stays below 0.75 at any threshold that keeps a tenth of its gold
PRECISION_FAMILIES = ("news", "wiki", "short")


def _sets(families=None):
    from calibration_sets import FAMILIES, build_sets

    return build_sets(DATA, families=families or FAMILIES)


def _encoder(name: str):
    from xmine.encoders import load_encoder

    return load_encoder(name)


# ---------------------------------------------------------------- step 1: embeddings (cached)
def embed(encoder_name: str, budget_s: float) -> int:
    """Encode the sets' sentences not cached yet, for at most about `budget_s` seconds; the number
    still missing afterwards (0: done). Resumable: the cache commits every chunk."""
    from calibration_sets import sentences
    from xmine.io.corpus import truncate_for_encoding
    from xmine.encoders.embed_cache import EmbeddingCache, _key, cached_encode

    enc = _encoder(encoder_name)
    texts = truncate_for_encoding(sentences(_sets()))
    cache = EmbeddingCache(enc.fingerprint())
    try:
        have = set()
        keys = [_key(s) for s in texts]
        for i in range(0, len(keys), 20_000):
            have |= set(cache.lookup(keys[i:i + 20_000]))
    finally:
        cache.close()
    todo = [s for s, k in zip(texts, keys) if k not in have]
    start = time.monotonic()
    done = 0
    chunk = 2048
    for i in range(0, len(todo), chunk):
        if time.monotonic() - start > budget_s:
            break
        cached_encode(enc, todo[i:i + chunk], show_progress=False)
        done += len(todo[i:i + chunk])
    rate = done / max(time.monotonic() - start, 1e-9)
    left = len(todo) - done
    click.echo(f"{encoder_name}: {len(texts)} sentences, {len(texts) - len(todo)} cached before, {done} encoded "
               f"({rate:.0f}/s), {left} left")
    return left


@click.group("calibrate-defaults")
def command() -> None:
    """Default thresholds and score caps of every shipped space, chosen leave-one-family-out."""


@command.command("embed")
@click.option("--encoder", "encoder_name", type=click.Choice(ENCODERS), required=True)
@click.option("--budget-s", type=float, default=240, show_default=True, help="Stop starting chunks after this long.")
def embed_command(encoder_name, budget_s):
    """Encode the calibration sentences into the embedding cache (resumable; exit 3 while some are left)."""
    left = embed(encoder_name, budget_s)
    raise SystemExit(3 if left else 0)


# ---------------------------------------------------------------- step 2: candidates of every set and space
def _vectors(space: str, texts: list[str]) -> np.ndarray:
    from xmine.benchmarks.common import l2_normalise
    from xmine.io.corpus import truncate_for_encoding
    from xmine.encoders.embed_cache import cached_encode

    encoder_name, projection = SPACES[space]
    enc = _encoder(encoder_name)
    x = cached_encode(enc, truncate_for_encoding(texts), show_progress=False)
    if projection is not None:
        x = _projection(enc).transform(x, "meaning")
    return l2_normalise(x)


def _projection(enc):
    from xmine.encoders.projection import DEFAULT, choose_projection, resolve_projection

    return resolve_projection(choose_projection(DEFAULT, encoder_name=enc.name, encoder_fp=enc.fingerprint()).path)


def exact_knn(x: np.ndarray, y: np.ndarray, k: int, block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Each row of x's k nearest rows of y by inner product (exact, fp32): (sims, rows), best first."""
    k = min(k, len(y))
    sims, rows = np.empty((len(x), k), np.float32), np.empty((len(x), k), np.int64)
    for i in range(0, len(x), block):
        s = x[i:i + block] @ y.T
        top = np.argpartition(-s, k - 1, axis=1)[:, :k]
        ts = np.take_along_axis(s, top, 1)
        order = np.argsort(-ts, axis=1, kind="stable")
        sims[i:i + block], rows[i:i + block] = np.take_along_axis(ts, order, 1), np.take_along_axis(top, order, 1)
    return sims, rows


def candidates(space: str, sets) -> dict[str, np.ndarray]:
    """Per set and margin: every candidate's score and whether it is gold (`select_pairs`, k = 4, max
    retrieval, no threshold), as arrays named `<set>|<margin>|score` and `<set>|<margin>|gold`, and
    `<set>|n_gold`."""
    from xmine.mining.select import MiningConfig, select_pairs

    out = {}
    for st in sets:
        x, y = _vectors(space, st.xx), _vectors(space, st.en)
        fs, fi = exact_knn(x, y, KNN)
        bs, bi = exact_knn(y, x, KNN)
        gold_of = np.full(len(st.xx), -1)
        gold_of[st.gold[:, 0]] = st.gold[:, 1]
        for margin in MARGINS:
            mined = select_pairs(fs, fi, bs, bi, config=MiningConfig(k=K, margin=margin, retrieval="max"))
            out[f"{st.name}|{margin}|score"] = mined.score.astype(np.float64)
            out[f"{st.name}|{margin}|gold"] = gold_of[mined.src_idx] == mined.tgt_idx
        out[f"{st.name}|n_gold"] = np.array(len(st.gold))
    return out


def candidates_path(space: str) -> Path:
    return WORK / f"candidates-{space}.npz"


@command.command("mine")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: every space.")
def mine_command(spaces):
    """Mine every set in every space (embeddings must be cached: `embed` first)."""
    from calibration_sets import fingerprint

    sets = _sets()
    WORK.mkdir(parents=True, exist_ok=True)
    for space in spaces or SPACES:
        t0 = time.monotonic()
        arrays = candidates(space, sets)
        arrays["sets_sha256"] = np.array(fingerprint(sets))
        tmp = candidates_path(space).with_suffix(".tmp.npz")
        np.savez_compressed(tmp, **arrays)
        tmp.replace(candidates_path(space))
        click.echo(f"{space}: {len(sets)} sets mined in {time.monotonic() - t0:.0f} s")


# ---------------------------------------------------------------- step 3: the choice
class Curves:
    """One space and margin: every set's precision / recall / F1 over a common threshold grid, and
    each set's own best F1 (over every threshold, not only the grid's)."""

    def __init__(self, arrays, sets: list[dict], margin: str):
        from xmine.benchmarks.bucc import best_threshold, prf_curve

        self.sets = sets
        runs = [(arrays[f"{s['name']}|{margin}|score"], arrays[f"{s['name']}|{margin}|gold"],
                 int(arrays[f"{s['name']}|n_gold"])) for s in sets]
        lo = min(float(r[0].min()) for r in runs)
        hi = max(float(r[0].max()) for r in runs)
        self.grid = np.round(np.arange(np.floor(lo * 1000), np.ceil(hi * 1000) + 1) / 1000, 3)
        curves = [prf_curve(s, c, g, self.grid) for s, c, g in runs]
        self.p, self.r, self.f1 = (np.array([c[m] for c in curves]) for m in ("precision", "recall", "f1"))
        self.best = np.array([best_threshold(s, c, g)[1]["f1"] for s, c, g in runs])
        self.gold_max = max((float(s[c].max()) for s, c, _ in runs if c.any()), default=float("nan"))
        self.family = np.array([s["family"] for s in sets])

    def _family_mean(self, values: np.ndarray, families) -> np.ndarray:
        """Mean over `families` of each family's mean over its sets (per grid point)."""
        return np.mean([values[self.family == f].mean(axis=0) for f in families], axis=0)

    def choose(self, families, point: str) -> float:
        """The threshold `point` chooses on `families` (module doc). Where no threshold reaches the
        precision asked for (a margin that cannot: `absolute` on templated sets), balanced takes the
        smallest gap and precision the highest precision."""
        prec = self._family_mean(self.p, [f for f in families if f in PRECISION_FAMILIES] or families)
        if point == "balanced":
            gap = self._family_mean(self.best[:, None] - self.f1, families)
            ok = prec >= PRECISION_FLOOR
            return float(self.grid[int(np.argmin(np.where(ok, gap, np.inf) if ok.any() else gap))])
        reached = np.flatnonzero(prec >= PRECISION_TARGET)
        return float(self.grid[reached[0]] if len(reached) else self.grid[int(np.argmax(prec))])

    def at(self, t: float | None, rows) -> list[dict]:
        """Each set of `rows` at threshold t (None: every pair kept)."""
        i = 0 if t is None else int(np.clip(np.searchsorted(self.grid, t - 1e-9), 0, len(self.grid) - 1))
        return [{"set": self.sets[j]["name"], "family": self.sets[j]["family"], "threshold": t,
                 "precision": float(self.p[j, i]), "recall": float(self.r[j, i]), "f1": float(self.f1[j, i]),
                 "best_f1": float(self.best[j]), "gap": float(self.best[j] - self.f1[j, i])} for j in rows]


def summarise(rows: list[dict]) -> dict:
    """Means over sets of gap, precision, recall, F1 (x100), and the largest gap."""
    return {"sets": len(rows), "gap": 100 * float(np.mean([r["gap"] for r in rows])),
            "worst_gap": 100 * float(max(r["gap"] for r in rows)),
            "precision": 100 * float(np.mean([r["precision"] for r in rows])),
            "recall": 100 * float(np.mean([r["recall"] for r in rows])),
            "f1": 100 * float(np.mean([r["f1"] for r in rows])), "best_f1": 100 * float(np.mean([r["best_f1"] for r in rows]))}


def calibrate_space(arrays, sets: list[dict], margin: str, old: float | None) -> dict:
    """One space and margin: the thresholds chosen on all families, and each family at the threshold
    chosen without it (leave one family out); `old`: the default before this calibration."""
    from calibration_sets import FAMILIES

    cv = Curves(arrays, sets, margin)
    families = [f for f in FAMILIES if (cv.family == f).any()]
    out = {"points": {}, "gold_max": cv.gold_max}
    for point in ("balanced", "precision"):
        held = {}
        for f in families:
            t = cv.choose([g for g in families if g != f], point)
            rows = cv.at(t, np.flatnonzero(cv.family == f))
            held[f] = {"threshold": t, **summarise(rows), "per_set": rows}
        all_rows = [r for f in families for r in held[f]["per_set"]]
        out["points"][point] = {"threshold": cv.choose(families, point), "held_out": held,
                                "held_out_mean": summarise(all_rows)}
    everything = np.arange(len(sets))
    out["old_default"] = {"threshold": old, **summarise(cv.at(old, everything))}
    out["chosen_in_sample"] = {p: summarise(cv.at(out["points"][p]["threshold"], everything))
                               for p in out["points"]}
    return out


def per_language(arrays, sets: list[dict], single: dict) -> dict:
    """Would per-language thresholds beat the single one? Each language's threshold is the one
    with the smallest gap on its FLORES-only wiki set; it is scored on that language's sets of the
    other families, beside the single balanced threshold chosen without each family (`single`:
    the ratio margin's held-out results). Means over those sets (x100)."""
    cv = Curves(arrays, sets, "ratio")
    iso = np.array([s["iso"] for s in sets])
    flores = np.array([s["family"] == "wiki" and not s["name"].endswith("-in-news") for s in sets])
    chosen, rows = {}, []
    for j, st in enumerate(sets):
        own = np.flatnonzero(flores & (iso == st["iso"]))
        if st["family"] == "wiki" or not len(own):
            continue
        if st["iso"] not in chosen:
            chosen[st["iso"]] = float(cv.grid[int(np.argmin((cv.best[own, None] - cv.f1[own]).mean(axis=0)))])
        lang, = cv.at(chosen[st["iso"]], [j])
        one, = cv.at(single[st["family"]]["threshold"], [j])
        rows.append((lang, one))
    return {"thresholds": chosen, "sets": len(rows),
            "per_language": summarise([a for a, _ in rows]) if rows else None,
            "single": summarise([b for _, b in rows]) if rows else None}


#: the defaults before this calibration, to report against: the projection's SHIPPED.json values
#: chosen by benchmarks/lab/calibrate.py; raw embeddings had none (every pair kept)
PREVIOUS_DEFAULTS = {"projection": {"ratio": 1.029, "distance": 0.024, "absolute": 0.936}}


def old_default(space: str, margin: str) -> float | None:
    return PREVIOUS_DEFAULTS.get(space, {}).get(margin)


def choose(spaces=None) -> dict:
    from calibration_sets import fingerprint

    sets = _sets()
    meta = [dict(name=s.name, **s.counts) for s in sets]
    result = {"command": "python benchmarks/lab/run.py calibrate-defaults choose", "k": K, "retrieval": "max",
              "precision_floor": PRECISION_FLOOR, "precision_target": PRECISION_TARGET, "cap_factor": CAP_FACTOR,
              "sets_sha256": fingerprint(sets), "sets": meta, "spaces": {}}
    for space in spaces or SPACES:
        arrays = np.load(candidates_path(space))
        if str(arrays["sets_sha256"]) != result["sets_sha256"]:
            raise click.ClickException(f"{candidates_path(space)}: mined on other sets; run `mine` again")
        langs = SPACE_LANGUAGES.get(space)
        mine = [s for s in meta if langs is None or s["iso"] in langs]
        per = {m: calibrate_space(arrays, mine, m, old_default(space, m)) for m in MARGINS}
        result["spaces"][space] = {"margins": per, "score_max": {"ratio": score_cap(per["ratio"]["gold_max"])},
                                   "per_language_check": per_language(
                                       arrays, mine, per["ratio"]["points"]["balanced"]["held_out"]),
                                   "languages": sorted(langs) if langs else "all",
                                   "sets": [s["name"] for s in mine]}
    return result


def table(result: dict, margins=MARGINS) -> str:
    """Held-out gap / precision / recall per family, space, margin and point, as text."""
    lines = [f"{'space':<14} {'margin':<8} {'point':<9} {'t':>6}  " + "  ".join(
        f"{f:>24}" for f in ("news", "wiki", "short", "templated", "mean"))]
    for (space, r), margin in ((x, m) for x in result["spaces"].items() for m in margins):
        for point, p in r["margins"][margin]["points"].items():
            cells = []
            for f in ("news", "wiki", "short", "templated"):
                h = p["held_out"].get(f)
                cells.append(f"gap {h['gap']:4.1f} P {h['precision']:5.1f} R {h['recall']:5.1f}" if h else "-")
            m = p["held_out_mean"]
            cells.append(f"gap {m['gap']:4.1f} P {m['precision']:5.1f} R {m['recall']:5.1f}")
            lines.append(f"{space:<14} {margin:<8} {point:<9} {p['threshold']:6.3f}  " + "  ".join(f"{c:>24}" for c in cells))
    return "\n".join(lines)


def table_rows(result: dict) -> list[list]:
    """The held-out table of the result JSON: per space, margin and point (ratio, distance)."""
    rows = []
    for space, r in result["spaces"].items():
        for margin in ("ratio", "distance"):
            for point, p in r["margins"][margin]["points"].items():
                m = p["held_out_mean"]
                rows.append([space, margin, point, f"{p['threshold']:g}"] + [p["held_out"][f]["gap"] for f in FAMILY_ORDER]
                            + [m["gap"], m["worst_gap"], m["precision"], m["recall"], m["f1"], m["best_f1"]])
    return rows


FAMILY_ORDER = ("news", "wiki", "short", "templated")
COLUMNS = (["space", "margin", "point", "threshold"] + [f"{f} gap" for f in FAMILY_ORDER]
           + ["mean gap", "worst gap", "P", "R", "F1", "best F1"])


@command.command("choose")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True,
              help="Only these spaces (a look: nothing is written). Default: every space.")
@click.option("--install", is_flag=True, help="Write the chosen values into SHIPPED.json and xmine/mining/calibration.json.")
def choose_command(spaces, install):
    """Choose every space's thresholds leave-one-family-out; write benchmarks/results/calibration-defaults.json."""
    from calibration_sets import source_files
    from xmine.benchmarks.common import RawEmbedder, Variant, results_dir, write_result

    started = time.monotonic()
    result = choose(spaces)
    click.echo(table(result))
    if spaces:
        return
    out = results_dir() / "calibration-defaults.json"
    enc = _encoder("me5-small")
    raw = RawEmbedder(enc)
    write_result(out, task="calibration_defaults", encoder=enc,
                 variants=[Variant("raw", "raw", raw), Variant("default", "meaning", raw, _projection(enc).fingerprint())],
                 data_files=source_files(DATA), parameters={"command": result["command"], "k": K, "retrieval": "max"},
                 columns=COLUMNS, rows=table_rows(result), details=result, seconds=time.monotonic() - started)
    click.echo(f"-> {out}")
    if install:
        install_result(result, out)


def _record(space: dict) -> dict:
    """What a space's record holds: thresholds per operating point and margin, the caps, and the
    held-out quality they were chosen with (ratio margin, mean over every family held out)."""
    margins = space["margins"]
    return {"operating_points": {p: {m: margins[m]["points"][p]["threshold"] for m in MARGINS}
                                 for p in ("balanced", "precision")},
            "score_max": space["score_max"],
            "held_out_ratio": {p: {k: round(v, 2) for k, v in margins["ratio"]["points"][p]["held_out_mean"].items()}
                               for p in ("balanced", "precision")}}


#: what other installers write into a raw encoder's record: `threshold-rules install` and
#: `install-margins`, and `languages --install`
INSTALLED_ELSEWHERE = ("threshold_rules", "default_margin", "languages")


def install_result(result: dict, result_path: Path) -> None:
    """The projection's values into its SHIPPED.json, the raw encoders' into mining/calibration.json."""
    from xmine.disentangle.projection import write_projection_manifest
    from xmine.artefacts.fileio import atomic_write_json
    from xmine.encoders.projection import SHIPPED_ROOT

    how = (f"chosen leave-one-family-out on {len(result['sets'])} BUCC-style sets of four families (news: WMT "
           "newstest 2008-2021; wiki: FLORES-200 devtest; short: Tatoeba-challenge; templated: MASSIVE), "
           f">= 100 gold pairs each, 2k-50k sentences a side; balanced: the smallest mean F1 gap to each set's "
           f"best at a mean precision >= {PRECISION_FLOOR}; precision: the lowest threshold with a mean precision >= "
           f"{PRECISION_TARGET} (precision: over the {', '.join(PRECISION_FAMILIES)} families); score_max: {CAP_FACTOR:g} times as far above 1 as the highest "
           "gold ratio margin (benchmarks/lab/calibrate_defaults.py)")
    sets = {s["name"]: {k: v for k, v in s.items() if k != "name"} for s in result["sets"]}
    calibration = {"command": result["command"] + " --install", "how": how,
                   "result": f"benchmarks/results/{result_path.name}", "sets_sha256": result["sets_sha256"]}
    path = SHIPPED_ROOT / "me5-small" / "SHIPPED.json"
    info = json.loads(path.read_text(encoding="utf-8"))
    rec = _record(result["spaces"]["projection"])
    info["default_thresholds"] = rec["operating_points"]["balanced"]
    info["operating_points"] = rec["operating_points"]
    info["score_max"] = rec["score_max"]
    info["threshold_calibration"] = calibration | {"held_out_ratio": rec["held_out_ratio"], "sets": sets}
    atomic_write_json(path, info)
    # the manifest records SHIPPED.json's sha256: rewritten with it, or the projection no longer loads
    write_projection_manifest(path.parent, json.loads((path.parent / "config.json").read_text(encoding="utf-8")))
    target = ROOT / "mining" / "calibration.json"
    before = json.loads(target.read_text(encoding="utf-8")).get("encoders", {}) if target.is_file() else {}
    encoders = {}
    for space, name in (("raw-me5-small", "me5-small"), ("raw-use-m3", "use-m3")):
        enc = _encoder(name)
        encoders[name] = {"encoder_id": enc.fingerprint()["id"], **_record(result["spaces"][space])}
        for key in INSTALLED_ELSEWHERE:  # other installers' values, kept (as in SHIPPED.json)
            if key in before.get(name, {}):
                encoders[name][key] = before[name][key]
    atomic_write_json(target, {"kind": "xmine-mining-calibration", **calibration, "sets": sets, "encoders": encoders})
    click.echo(f"installed: {path}, {target}")


# ---------------------------------------------------------------- per language: where the calibration's languages lie
#: FLORES-200 devtest under the data folder
FLORES_DEVTEST = "parallel/flores200/devtest"
#: the record's name in each space's calibration (SHIPPED.json, mining/calibration.json)
LANGUAGES_KEY = "languages"


def language_records(space: str, codes: list[str], log=click.echo) -> dict[str, dict]:
    """Per FLORES-200 code of `codes`: the balanced thresholds (per margin) of the record `xmine
    calibrate --src-lang CODE --tgt-lang eng_Latn` writes for `space` (`mining.calibrate.calibrate`,
    the command's own path, its embeddings from the lab's cache)."""
    from xmine.encoders.embed_cache import cached_encode
    from xmine.io.corpus import truncate_for_encoding
    from xmine.mining.calibrate import calibrate, flores_file, read_aligned

    flores = DATA / FLORES_DEVTEST
    encoder_name, projection = SPACES[space]
    enc = _encoder(encoder_name)
    out = {}
    for i, code in enumerate(codes):
        record = calibrate(read_aligned(flores_file(flores, code), flores_file(flores, "eng_Latn")),
                           encoder=encoder_name, projection=projection or "none", src_lang=code, tgt_lang="eng_Latn",
                           data={"source": "FLORES-200 devtest"},
                           encode=lambda texts: cached_encode(enc, truncate_for_encoding(texts), show_progress=False))
        out[code] = {m: round(t, 5) for m, t in record["operating_points"]["balanced"].items()}
        if i % 20 == 0:
            log(f"{space}: {i + 1}/{len(codes)} {code} {out[code]}")
    return out


def calibration_codes(codes: list[str]) -> set[str]:
    """The FLORES-200 codes of the calibration sets' languages, in the script their sets are written
    in: a wiki set's own code (`calibration_sets.WIKI`, `WIKI_IN_NEWS`), else the language's one
    code; a language with several and no wiki set is left out, said (FLORES-200 also has Arabic in
    Latin script, arb_Latn, which no calibration set is written in)."""
    from calibration_sets import WIKI, WIKI_IN_NEWS
    from xmine.langs import normalize_lang

    named = set(WIKI) | {c for c, *_ in WIKI_IN_NEWS}
    out = set()
    for iso in sorted({s.iso for s in _sets()}):
        found = [c for c in codes if normalize_lang(c) == iso]
        chosen = [c for c in found if c in named] or (found if len(found) == 1 else [])
        if not chosen:
            click.echo(f"calibration language {iso}: FLORES-200 codes {found}, none taken")
        out.update(chosen)
    return out


@command.command("languages")
@click.option("--install", is_flag=True, help="Write each space's values into its record (SHIPPED.json, "
                                              "xmine/mining/calibration.json), which `xmine mine` reads.")
def languages_command(install):
    """Where each language lies against the calibration's: per shipped space and FLORES-200 language
    (use-m3: its own), the balanced thresholds of the language's `xmine calibrate` record against
    English, and their range over the languages of the calibration sets. A language below that
    range is one whose translations score lower than any the defaults were calibrated on, so the
    defaults are likely to keep too few of its pairs (benchmarks/results/notes/heldout_wiki.md), and
    `xmine mine` says so (`threshold_rule.language_notes`). Writes
    benchmarks/results/language-thresholds.json."""
    from xmine.benchmarks.common import RawEmbedder, Variant, results_dir, write_result
    from xmine.langs import normalize_lang

    started = time.monotonic()
    flores = DATA / FLORES_DEVTEST
    codes = sorted(p.stem for p in flores.glob("*.devtest") if p.stem != "eng_Latn")
    calibration = calibration_codes(codes)
    result = {"command": "python benchmarks/lab/run.py calibrate-defaults languages", "spaces": {}}
    rows = []
    for space in SPACES:
        langs = SPACE_LANGUAGES.get(space)
        mine = [c for c in codes if langs is None or normalize_lang(c) in langs]
        values = language_records(space, mine)
        inside = sorted(c for c in values if c in calibration)
        span = {m: [min(values[c][m] for c in inside), max(values[c][m] for c in inside)] for m in values[inside[0]]}
        below = sorted(c for c in values if values[c]["ratio"] < span["ratio"][0])
        result["spaces"][space] = {"values": values, "calibration_languages": inside, "calibration_range": span,
                                   "below_range_ratio": below}
        click.echo(f"{space}: {len(values)} languages; calibration's {len(inside)}: {span}; below in ratio: "
                   f"{len(below)}")
        rows += [[space, c, values[c]["ratio"], values[c]["distance"], c in inside,
                  values[c]["ratio"] < span["ratio"][0]] for c in sorted(values)]
    out = results_dir() / "language-thresholds.json"
    enc = _encoder("me5-small")
    write_result(out, task="language_thresholds", encoder=enc, variants=[Variant("raw", "raw", RawEmbedder(enc))],
                 data_files=sorted(flores.glob("*.devtest")), parameters={"command": result["command"]},
                 columns=["space", "language", "ratio", "distance", "calibration language", "below the range (ratio)"],
                 rows=rows, details=result, seconds=time.monotonic() - started)
    click.echo(f"-> {out}")
    if install:
        install_languages(result, out)


def install_languages(result: dict, result_path: Path) -> None:
    """Each space's per-language values and its calibration languages' range into its record."""
    from threshold_rules import update_record

    for space, found in result["spaces"].items():
        record = {"source": "the balanced thresholds of `xmine calibrate --src-lang LANG --tgt-lang eng_Latn` on "
                            "FLORES-200 devtest, per FLORES code", "command": result["command"] + " --install",
                  "result": f"benchmarks/results/{result_path.name}",
                  "calibration_range": found["calibration_range"], "values": found["values"]}
        click.echo(f"installed: {update_record(space, lambda info, record=record: info.update({LANGUAGES_KEY: record}))}")


@command.command("overlap")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
def overlap_command(results):
    """How much of the `bench mining` sets behind RESULTS (their result JSONs) the calibration sets
    hold: per language, the share of the sets' sentences found on either side of any calibration
    set, and of their gold pairs with both sides found. Both draw on FLORES-200 devtest and WMT
    newstest, so `bench mining` is not data the calibration never read (prints: a look)."""
    from xmine.benchmarks.common import read_result

    seen = set()
    for st in _sets():
        seen.update(st.xx)
        seen.update(st.en)
    for path in results:
        result = read_result(path)
        params = result.get("parameters") or result["provenance"]["parameters"]
        for lang in params["langs"]:
            folder = Path(params["sets_dir"]) / f"{lang}-en"

            def side(suffix: str) -> dict[str, str]:
                text = (folder / f"{lang}-en.sample.{suffix}").read_text(encoding="utf-8")
                return dict(line.split("\t", 1) for line in text.splitlines())

            xx, en = side(lang), side("en")
            gold = [line.split("\t") for line in
                    (folder / f"{lang}-en.sample.gold").read_text(encoding="utf-8").splitlines()]
            texts = [*xx.values(), *en.values()]
            click.echo(f"{path.name} {lang}: sentences {np.mean([t in seen for t in texts]):.2f}, gold pairs "
                       f"{np.mean([xx[a] in seen and en[b] in seen for a, b in gold]):.2f}")
