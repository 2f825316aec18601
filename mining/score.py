"""`xmine score`: the cosine and margin of every pair of an existing bitext, and which rule keeps
or drops it (LASER's `mine_bitexts.py --mode score`, for a bitext one already has).

1. The two sides are written one sentence a line (pair i on line i) into `OUT.work/` and embedded
   into stores there by the one encoding path (`xmine.inputs.load_side`: resumable, in the space
   `mine` would use, the shipped projection by default). What reading them finds (lines cut for
   encoding, tabs or line breaks inside a field) is reported of the bitext's own file and lines;
   OUT.json records the bitext (each file's sha256, the format and fields), not these copies.
   A bitext of two embedding stores (`Bitext.stores`: vectors made elsewhere, or by `xmine embed`)
   is its own sides: nothing is staged or encoded.
2. Neighbourhoods, as `mine` computes them: the k nearest targets of each distinct source
   sentence and the k nearest sources of each distinct target sentence, by the same exact
   search (`knn.exact_knn_both`; `approximate`: the IVF search of `--approximate`), among the
   other side of the bitext itself, or among the stores or corpora `src_corpus`/`tgt_corpus`
   (a target's neighbours are looked for in the source corpus and vice versa).
3. Per pair: its cosine (`rescore.exact_dot`, the score the search gives), the margin with
   the two neighbourhood means (`select.margin_score`), and the first rule that drops it:
   `empty` (a side without text), `threshold` (margin below the threshold `mine` uses in this space:
   `threshold_rule.run_threshold`, its single value), then `mine`'s pair filters, the language rule too.
4. The bitext is read again and written with four columns added (`mining.score_output`), then
   checked unchanged since the run began (`Bitext.check_unchanged`): else no output is finished.

Memory: the bitext is streamed; per pair a few numbers (row ids, cosine, margin, rule) are kept.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
from array import array
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

from xmine.artefacts.directory import provenance
from xmine.artefacts.input_artefacts import artefact_kind
from xmine.errors import InputError
from xmine.langs import given_or_recorded
from xmine.io.corpus import CorpusStats
from xmine.io.reader_base import one_line
from xmine.exec.executor import LOCAL, Executor, executor_for
from xmine.encoders import DEFAULT_ENCODER
from xmine.encoders.input_encoders import Encoders
from xmine.encoders.loader import check_encoder_loadable
from xmine.encoders.precision import check_same_encoder
from xmine.inputs import check_artefact_lang, check_compatible, load_side
from xmine.mining.approximate import ApproximateConfig, approximate_knn_both
from xmine.mining.bitext import Bitext
from xmine.mining.mined_output import mined_in_another_space, mined_langs
from xmine.mining.config import EncodingConfig, SearchConfig, SelectionConfig, check_k_for_margin, check_score_cap
from xmine.mining.filters import RULES as FILTER_RULES, LANGUAGE_RULES, PairFilterConfig, apply_pair_filters
from xmine.mining.langid import check_installed
from xmine.mining.rescore import exact_dot
from xmine.mining.score_corpora import check_corpora, check_corpus_languages
from xmine.mining.score_output import (DROP_RULES, SCORE_KIND, PairScores, check_no_score_fields, resolve_score_format,
                                       write_scored)
from xmine.mining.calibrate import check_calibration_record, check_calibration_space
from xmine.mining.knn import exact_knn_both
from xmine.mining.select import MiningConfig, _masked_mean, margin_score
from xmine.mining.work import discard_work
from xmine.mining.threshold_rule import RuleUse, note_cap_not_above, note_few_neighbours, run_threshold
from xmine.artefacts.outputs import claim_output
from xmine.artefacts.records import to_json
from xmine.tempdirs import temporary_directory

log = logging.getLogger(__name__)

#: pairs whose rows are read and scored at once
_CHUNK = 65_536


@dataclass(kw_only=True)
class StagedSides:
    """The bitext's two sides, one sentence a line (pair i on line i), to embed; and how to name
    what reading them finds in the user's terms."""

    src: Path
    tgt: Path
    #: int64, per pair its line (or row) in the bitext
    numbers: np.ndarray
    #: per side (src, tgt), how many pairs' text held a tab or line break, which became a space
    flattened: list[int]

    def __len__(self) -> int:
        return len(self.numbers)

    def reported_as(self, bitext: Bitext, role: str) -> Callable[[CorpusStats], CorpusStats]:
        """What the warnings of embedding side `role` ("src"/"tgt") say: the bitext's file and its
        lines, not the staged file's (pair i's line there is i): a Moses pair's own file of that side
        (was: the source file named for both), a list's 0-based items (`bitext.listed`). Its empty
        lines are not warned about: such a pair is reported by the `empty` rule."""
        i = 0 if role == "src" else 1
        flat, listed = self.flattened[i], bitext.listed[i]
        if len(bitext.paths) == 2:  # a Moses pair: each side is a file of its own
            name = bitext.paths[i]
        else:
            name = Path(f"{bitext.path} ({'source' if role == 'src' else 'target'} side)")

        def shown(stats: CorpusStats) -> CorpusStats:
            lines = [int(self.numbers[n - 1]) for n in stats.long_lines], \
                [int(self.numbers[n - 1]) for n in stats.token_cut_lines]
            said = replace(stats, path=name, empty_lines=0, long_lines=lines[0], token_cut_lines=lines[1],
                           replaced_count=flat)
            return said.as_list(name.stem) if listed else said
        return shown


#: a text that is a number alone (a score, a count)
_NUMBER = re.compile(r"[-+]?(\d+([.,]\d*)?|[.,]\d+)([eE][-+]?\d+)?")


def write_sides(bitext: Bitext, work: Path) -> StagedSides:
    """Each side one sentence a line, pair i on line i (an empty text stays an empty line, which the
    store skips): the corpora the sides are embedded from."""
    work.mkdir(parents=True, exist_ok=True)
    paths = work / "src.txt", work / "tgt.txt"
    numbers = array("q")
    flattened = [0, 0]
    src_texts = tgt_texts = 0
    numeric = [0, 0]  # texts that are a number alone: a score column read as a side
    with open(paths[0], "w", encoding="utf-8", newline="\n") as fs, \
            open(paths[1], "w", encoding="utf-8", newline="\n") as ft:
        for pair in bitext.pairs():
            for side, (text, f) in enumerate(((pair.src, fs), (pair.tgt, ft))):
                line = one_line(text)
                flattened[side] += line != text
                numeric[side] += _NUMBER.fullmatch(line.strip()) is not None
                f.write(line.strip() + "\n")
            src_texts += bool(pair.src.strip())
            tgt_texts += bool(pair.tgt.strip())
            numbers.append(pair.number)
    if not numbers:
        raise InputError(bitext.path, "no pair in the bitext")
    for path, stats in bitext.line_stats.items():  # (was: a TSV or Moses file's, replaced without a word)
        if stats.replaced_count:
            log.warning(f"{path}: line-break characters{' or tabs' * (len(bitext.paths) == 2)} inside "
                        f"{stats.replaced_count} line(s) replaced by spaces, as xmine reads every text file (and "
                        "writes them so)")
    for side, count in (("source", src_texts), ("target", tgt_texts)):
        if count == 0:  # (was refused later, naming the staged file OUT.work/sides/*.txt)
            raise InputError(bitext.path, f"no pair has a {side} text ({len(numbers)} pair(s), every {side} empty)")
    for side, (count, texts) in enumerate(((numeric[0], src_texts), (numeric[1], tgt_texts))):
        if count == texts and texts > 1:  # (LASER's and stopes' score<TAB>src<TAB>tgt: was scored as a side, 0 kept)
            column = (bitext.read_fields or ("?", "?"))[side]
            raise InputError(bitext.path, f"every {('source', 'target')[side]} text is a number (column or field "
                                          f"{column}: a score?); name the sentences' columns with --src-field and "
                                          "--tgt-field")
    return StagedSides(src=paths[0], tgt=paths[1], numbers=np.frombuffer(numbers, dtype=np.int64), flattened=flattened)


def _rows_of_pairs(side, n: int) -> np.ndarray:
    """Per pair (line of the side's file), its row in the side's store; -1 for an empty line."""
    rows = np.full(n, -1, dtype=np.int64)
    rows[np.asarray(side.line_numbers, dtype=np.int64) - 1] = np.arange(len(side))
    return rows


def _neighbour_means(queries, base, config: MiningConfig, *, approximate: ApproximateConfig | None, work: Path,
                     key: str, show_progress: bool, executor: Executor = LOCAL) -> tuple[np.ndarray, np.ndarray]:
    """(mean cosine of each query row's k nearest base rows, mean of each base row's k nearest queries):
    the two neighbourhood means of the margin, by the search `mine` uses, here or as tasks on the
    Ray cluster of `executor` (exact: tiles of the product; approximate: index shards), the same
    numbers either way."""
    if approximate is not None:
        fs, fi, bs, bi = approximate_knn_both(queries, base, config.k, config=approximate, work_dir=work / "ann",
                                              key=key, show_progress=show_progress, executor=executor)
    else:
        fs, fi, bs, bi = exact_knn_both(queries, base, config.k, block_rows=config.block_rows,
                                        block_cols=config.block_cols, workers=config.workers, product=config.product,
                                        executor=executor, checkpoint_dir=work / "knn", checkpoint_key=key,
                                        show_progress=show_progress)
    return _masked_mean(fs, fi >= 0), _masked_mean(bs, bi >= 0)


def score_pairs(sx, sy, n: int, *, langs, config: MiningConfig, filters: PairFilterConfig,
                corpora=(None, None), approximate: ApproximateConfig | None = None, work: Path,
                show_progress: bool = True, executor: Executor = LOCAL) -> PairScores:
    """Score the n pairs whose sides are rows of `sx`, `sy` (`xmine.inputs.Side`s embedded from
    `write_sides`' files). `corpora`: Sides whose rows form the neighbourhoods of the targets
    (source-language corpus) and of the sources (target-language corpus); None: the bitext's own."""
    from xmine.mining.filter_step import Mineable, SideTexts

    plain = MiningConfig()  # distinct sentences, no length bounds: every row has a representative
    mx, my = Mineable(sx, plain), Mineable(sy, plain)
    src_corpus, tgt_corpus = corpora
    base_key = [sx.fingerprint_key(), sy.fingerprint_key(), config.k, config.block_rows, config.block_cols]

    def key(*parts) -> str:
        return hashlib.sha256(json.dumps(base_key + list(parts), default=str).encode()).hexdigest()

    search = dict(config=config, approximate=approximate, show_progress=show_progress, executor=executor)
    mean_x = mean_y = None
    if tgt_corpus is not None:  # each source's neighbours among the target-language corpus
        mt = Mineable(tgt_corpus, plain)
        mean_x, _ = _neighbour_means(mx.rows, mt.rows, work=work / "tgt-corpus",
                                     key=key("tgt-corpus", tgt_corpus.fingerprint_key()), **search)
    if src_corpus is not None:
        ms = Mineable(src_corpus, plain)
        mean_y, _ = _neighbour_means(my.rows, ms.rows, work=work / "src-corpus",
                                     key=key("src-corpus", src_corpus.fingerprint_key()), **search)
    if mean_x is None or mean_y is None:  # the bitext's own other side
        own_x, own_y = _neighbour_means(mx.rows, my.rows, work=work / "own", key=key("own"), **search)
        mean_x, mean_y = (own_x if mean_x is None else mean_x), (own_y if mean_y is None else mean_y)
    # what the sources' and the targets' neighbours are drawn from -> its distinct sentences
    neighbourhoods = dict([("target-language corpus", len(mt.ids)) if tgt_corpus is not None
                           else ("bitext's target side", len(my.ids)),
                           ("source-language corpus", len(ms.ids)) if src_corpus is not None
                           else ("bitext's source side", len(mx.ids))])

    src_rows, tgt_rows = _rows_of_pairs(sx, n), _rows_of_pairs(sy, n)
    cosine = np.full(n, np.nan, dtype=np.float32)
    margin = np.full(n, np.nan, dtype=np.float32)
    rule = np.full(n, -1, dtype=np.int8)
    both = np.flatnonzero((src_rows >= 0) & (tgt_rows >= 0))
    rule[(src_rows < 0) | (tgt_rows < 0)] = DROP_RULES.index("empty")
    for lo in range(0, len(both), _CHUNK):
        pairs = both[lo:lo + _CHUNK]
        s, t = src_rows[pairs], tgt_rows[pairs]
        cos = exact_dot(sx.rows[s], sy.rows[t])
        cosine[pairs] = cos
        margin[pairs] = margin_score(cos, mean_x[mx.position_of_row[s]], mean_y[my.position_of_row[t]],
                                     config.margin)
    if config.threshold is not None:
        low = both[~(margin[both] >= np.float64(config.threshold))]  # -inf (an undefined ratio) included
        rule[low] = DROP_RULES.index("threshold")
    judged = np.flatnonzero(rule < 0)
    _, reasons = apply_pair_filters(SideTexts(sx, src_rows[judged]), SideTexts(sy, tgt_rows[judged]),
                                    margin[judged], langs=langs, config=filters, margin=config.margin)
    dropped = reasons >= 0
    rule[judged[dropped]] = (reasons[dropped] + DROP_RULES.index(FILTER_RULES[0])).astype(np.int8)
    return PairScores(cosine=cosine, margin=margin, rule=rule, neighbourhoods=neighbourhoods)


def score_bitext(
    bitext: Bitext,
    *,
    out: str | Path,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    encoding: EncodingConfig = EncodingConfig(),
    search: SearchConfig = SearchConfig(),
    selection: SelectionConfig = SelectionConfig(),
    filters: PairFilterConfig = PairFilterConfig(),
    src_corpus: str | Path | None = None,
    tgt_corpus: str | Path | None = None,
    kept_only: bool = False,
    output_format: str | None = None,
    overwrite: bool = False,
    keep_work: bool = False,
    show_progress: bool = True,
) -> dict:
    """Score `bitext` into `out` (see the module doc); returns the summary (also `<out>.json`).

    The configs are `mine`'s (`xmine.mining.config`; a threshold "default" is `mine`'s calibrated one
    in this space), `filters` the pair filters. `kept_only`: write only the kept pairs.
    `output_format`: tsv, csv, jsonl or parquet (None: by the name of `out`). `out` is claimed as
    `mine` claims its output (`xmine.artefacts.outputs.claim_output`).
    """
    out = Path(out)
    projection = encoding.projection
    config = MiningConfig(k=search.k, margin=selection.given_margin, threshold=selection.given_threshold,
                          block_rows=search.block_rows, block_cols=search.block_cols, workers=search.workers,
                          product=search.product)
    fmt = resolve_score_format(out, output_format)
    check_k_for_margin(search, selection)
    check_score_cap(selection, filters)
    check_installed(filters.lid)
    if selection.calibration is not None:  # a wrong file fails now, not after the bitext is encoded
        check_calibration_record(selection.calibration,
                                 threshold_k=search.k if selection.calibrated else None)
    executor = executor_for(search.ray)  # join the cluster first: a wrong address fails before anything is written
    corpora_paths = (src_corpus, tgt_corpus)
    opened_corpora = check_corpora(corpora_paths)
    # The encoder named and the bitext (every row checked) before OUT is claimed: a name that cannot load or a
    # malformed row leaves nothing behind. A bitext of two stores brings its vectors (and the encoder's name).
    stores = bitext.stores() if bitext.format == "stores" else None
    # The languages the filters judge by and the corpora are checked against: a store's own, or its mining
    # run's, where none is given (was: a corpus of another language taken without a word; none for mine's output)
    recorded = (stores.src.lang, stores.tgt.lang) if stores else mined_langs(bitext)
    langs = (given_or_recorded(src_lang, recorded[0]), given_or_recorded(tgt_lang, recorded[1]))
    for path, lang in zip(corpora_paths, langs):
        if path is not None:
            check_artefact_lang(path, lang)
    check_corpus_languages(corpora_paths, langs)
    encoders = Encoders(encoding.encoder_config(), projection,
                        inputs=[p for p in (*(bitext.paths if stores else ()), *corpora_paths) if p is not None])
    if stores is None:
        check_encoder_loadable(encoders.encoder_name or DEFAULT_ENCODER, device=encoding.device)
        _ = encoders.encoder  # the bitext is text, always encoded: a model that cannot load leaves nothing behind
    if projection is not None and str(projection).lower() not in ("default", "none"):
        # a projection directory given: read, and checked against its encoder, now
        _ = encoders.projection
    encoder = stores.src.manifest.encoder if stores else encoders.encoder.fingerprint()
    for path, artefact in opened_corpora.items():  # (was: refused once the bitext was encoded, its work left)
        check_same_encoder(artefact.manifest.encoder, encoder, what=f"{artefact_kind(path).replace('-', ' ')} {path}")
    if selection.calibration is not None:  # of the space scored in: before the bitext is encoded
        check_calibration_space(selection.calibration, encoder_name=encoder["name"],
                                projection_dir=encoders.choice.path, encoder_id=encoder["id"])
    began = bitext.identity()  # (checked again when the scores are written beside its rows)
    with temporary_directory("score") as staged:
        staged_sides = None if stores else write_sides(bitext, Path(staged))
        check_no_score_fields(bitext)  # (its columns read by now; was: TSV/CSV columns doubled, others refused late)
        n = stores.lines if stores else len(staged_sides)
        with claim_output(out, kind=SCORE_KIND, form="tsv", inputs=[*bitext.paths, *corpora_paths, projection, selection.calibration],
                          overwrite=overwrite, companions=(".work",)) as claim:
            out = claim.path
            work = claim.work_dir(".work")
            if stores:
                src_txt, tgt_txt = bitext.paths
            else:
                (work / "sides").mkdir(exist_ok=True)
                src_txt, tgt_txt = (Path(shutil.move(p, work / "sides" / p.name))
                                    for p in (staged_sides.src, staged_sides.tgt))
            # As `mine`: OUT.work/'s stores are rebuilt with --overwrite and whenever OUT holds no finished
            # result (an interrupted run's); finished ones of the same input are reused: a run resumes.
            rebuild = claim.overwrite or claim.state != "finished"
            # the stores and indexes opened (and so checked) already, by path
            opened = {**opened_corpora, **({src_txt: stores.src, tgt_txt: stores.tgt} if stores else {})}
            loaded = []  # the two sides, then the corpora (None: not given)
            try:
                for path, lang, tag in ((src_txt, langs[0], "src"), (tgt_txt, langs[1], "tgt"),
                                        (src_corpus, langs[0], "src-corpus"), (tgt_corpus, langs[1], "tgt-corpus")):
                    loaded.append(None if path is None else load_side(
                        path, lang=lang, encoders=encoders, work_dir=work / tag, show_progress=show_progress,
                        rebuild=rebuild, reported_as=staged_sides.reported_as(bitext, tag)
                        if staged_sides and tag in ("src", "tgt") else None, opened=opened.get(path)))
                sides = [side for side in loaded if side is not None]
                for side in sides[1:]:
                    check_compatible(sides[0], side)
                sx, sy, *corpora = loaded
                other_space = mined_in_another_space(bitext, sx.encoder.to_dict(), to_json(sx.projection))
                if other_space is not None:
                    log.warning(other_space)
                # mine's threshold and score cap of the space scored in; no rule of a run (`RuleUse.NONE`)
                unjudged = [r for r in LANGUAGE_RULES if r in filters.active(config.margin)
                            and r not in filters.active(config.margin, langs)]
                if unjudged:  # (was: silent, and OUT.json listed them as active)
                    shown = "the lists given" if any(bitext.listed) else bitext.path  # (xmine.score of lists)
                    log.warning(f"{shown}: no --src-lang or --tgt-lang given: the {' and '.join(unjudged)} "
                                "filter(s) judge nothing; give the languages to run them")
                config, filters, threshold_record = run_threshold(
                    selection, config, filters, encoders.choice.path if sx.projection else None, sx.encoder.name,
                    rules=RuleUse.NONE, langs=langs, encoder_id=sx.encoder.id,
                    side_rows=min(len(c if c is not None else s) for c, s in zip(corpora, (sx, sy))))
                scores = score_pairs(sx, sy, n, langs=langs, config=config, filters=filters, corpora=tuple(corpora),
                                     approximate=replace(search.approximate_config(), tunable=False) if search.approximate else None, work=work / "search",
                                     show_progress=show_progress, executor=executor)
                note_few_neighbours(threshold_record, scores.neighbourhoods, config.k, remedy=(
                    "--src-corpus and --tgt-corpus (monolingual text of each language) give every pair "
                    "neighbourhoods of k"))
                note_cap_not_above(threshold_record, filters, config.margin)
                written = write_scored(claim, fmt, bitext, scores, kept_only=kept_only)
                summary = {
                    "output": str(out), "format": fmt, "pairs": n, "kept": int(scores.keep.sum()), "written": written,
                    "dropped": scores.counts(filters.active(config.margin, langs)),
                    "neighbourhoods": {
                        "src": str(tgt_corpus) if tgt_corpus is not None else "the bitext's targets",
                        "tgt": str(src_corpus) if src_corpus is not None else "the bitext's sources",
                        "k": config.k, "search": "approximate" if search.approximate else "exact"},
                    "ray": search.ray,
                    "threshold": threshold_record,
                    "filters": filters.record(config.margin, langs) | {"languages": list(langs)},
                    "encoder": sx.encoder.to_dict(), "projection": to_json(sx.projection), "part": sx.part,
                    "projection_choice": encoders.choice.record(),
                    **({"mined_in_another_space": other_space} if other_space is not None else {}),
                    # the user's bitext, not the sides staged from it (removed when done)
                    # the languages judged by: a store's own where none was given (was: null, as given)
                    "provenance": provenance(**asdict(config), src_lang=langs[0], tgt_lang=langs[1],
                                             bitext=bitext.check_unchanged(began),
                                             corpora=[None if c is None else c.fingerprint for c in corpora]),
                }
            finally:
                for side in loaded:
                    if side is not None:
                        side.close()
            if not keep_work:
                discard_work(work)
            return claim.finish(summary)


__all__ = ["DROP_RULES", "PairScores", "SCORE_KIND", "score_bitext", "score_pairs", "write_sides"]
