"""File-level mining: `mine(src, tgt, out=...)` behind `xmine mine`.

Each side is a text file, an embedding store or an index directory, opened by the input layer
(`xmine.inputs.load_side`): rows read block by block, text by offset. Text files are embedded
into stores in `<out>.work/` first (the one encoding path, resumable). Both sides are
deduplicated by 64-bit hashes of their sentences (a pair is output once, with the first line of
each sentence; see `Side.unique_rows` for collisions), length-filtered and, with `--lang-filter`,
rid of the sentences identified as another language (mining/filter_step.py; by default when both
languages are known), cleaned of rows without letters, near-duplicates and texts present on both
sides (mining/presearch.py, default on), so either search sees exactly the rows that may be
mined: its k neighbours are k real candidates. Then:
- exact (default): the blocked kNN (mining/knn.py), checkpointed in `<out>.work/knn/`;
- approximate: IVF / IVF-PQ indexes (mining/approximate.py), checkpointed in `<out>.work/ann/`;
  with a threshold, the neighbourhoods that decide a pair are searched again wider (`refine_passing`);
- a side that is an index directory: searched through that index (over-fetching 2k to absorb
  its duplicate and filtered rows).
Margin scoring and selection are shared (select.select_pairs). The pair filters
(mining/filters.py: identical sides, score cap, script, URLs, numbers, length ratio, language)
then drop selected pairs that are no translations. The output is written atomically, highest
score first, each sentence read from its store by offset: `score<TAB>src<TAB>tgt`, or Moses, JSON
Lines, Parquet or a Hugging Face dataset (mining/writers.py).

Memory: one block or shard and the per-row state (the k-state (n + m) * k * 12 bytes, the exact
search's per-worker candidate lists, the row index, dedup and selection: 40-620 bytes a row as
measured, docs/scaling.md); never a copy of a side.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from xmine.artefacts.directory import provenance
from xmine.errors import ConfigError, InputError, NonFiniteRowError
from xmine.exec.executor import executor_for
from xmine.artefacts.input_artefacts import artefact_input, artefact_kind, artefact_lang
from xmine.encoders.input_encoders import Encoders
from xmine.inputs import check_artefact_lang, check_compatible, check_split_languages, load_side
from xmine.mining.calibrate import check_calibration_record, check_calibration_space
from xmine.mining.config import MineConfig
from xmine.mining.filter_step import (Mineable, check_declared_languages, dropped_summary, filter_pairs,
                                      lang_filter_langs, note_side_left, pre_search)
from xmine.mining.presearch import pair_number_variants
from xmine.mining.products import resolve_product
from xmine.mining.search_pairs import index_side_note, search_pairs
from xmine.mining.threshold_rule import (RuleUse, apply_run_threshold, note_cap_not_above, note_few_neighbours,
                                        run_threshold)
from xmine.mining.writers import COMPANIONS, MINING_KIND, moses_suffixes, output_format as resolve_format
from xmine.mining.writers import MinedRows, PairColumn, write_meta, write_mined
from xmine.mining.work import discard_work, remove_work
from xmine.artefacts.output_state import same_file
from xmine.artefacts.outputs import claim_output
from xmine.io.corpus import CorpusStats
from xmine.io.readers import check_has_text, for_each_input, reading_of
from xmine.io.record_fields import check_fields_readable, kept_field_columns, record_fields
from xmine.artefacts.records import to_json
from xmine.encoders.loader import untrained_languages
from xmine.encoders.projection import unseen_languages, unseen_languages_note
from xmine.langs import UNDETERMINED, given_or_recorded
from xmine.io.stdin import as_given, is_stdin, is_url, shown_path, spool_stdin, spool_url
from xmine.tempdirs import temporary_directory

log = logging.getLogger(__name__)


#: names --keep-filtered's TSV must not have: another format's or a compressor's
_NOT_TSV = (".jsonl", ".ndjson", ".json", ".parquet", ".pq", ".csv", ".tmx", ".gz", ".xz", ".bz2", ".zst")
FILTERED_KIND = "filtered-pairs"


def mine(config: MineConfig, *, show_progress: bool = True,
         reported_as: Mapping[str, Callable[[CorpusStats], CorpusStats]] | None = None) -> dict:
    """Run `config` (`xmine.mining.config`, whose fields say what each setting does); returns a
    summary (also written to `<output.path>.json`).

    The output is claimed first (`xmine.artefacts.outputs.claim_output`): it must not be an input, an
    existing one (with `.json`, `.meta`, `.work/`) must be an earlier mining result and is
    replaced only with `output.overwrite`, and a second run writing the same output is refused.
    Text sides are encoded by `encoding`, by default with the encoder, precision and runtime of the
    artefact sides (stores, indexes), else me5-small at "auto". A side at an fsspec URL is copied as
    it streams (`xmine.io.stdin.spool_url`) into a temporary folder, removed when the run ends; its
    URL is what the outputs record. `search.ray` runs the search's units as Ray tasks
    (`xmine.exec.executor`), with byte-identical output.

    `selection.threshold` "default": the calibrated threshold of the space mined in (the
    projection's meaning space, else the encoder's raw embeddings; `selection.calibration`, a record
    of `xmine calibrate`, in place of the shipped values) for the margin at
    `selection.operating_point` (`xmine.mining.defaults`), moved by the run's rule where the space
    has one (`xmine.mining.threshold_rule`); `filters.pairs.score_max` None: that space's cap. A
    space without a calibration gets a threshold estimated from the run's own candidates, uncapped.
    The summary records the threshold and the cap used and where they came from (`threshold`), and
    what the language filter (`lang_filter`), the pre-search cleaning (`pre_search`) and each pair
    filter (`filters`) removed. `reported_as` ("src", "tgt"): what the warnings of reading a text
    side name (`xmine.store.embed_corpus`), where its file is not the user's (a Python list's).
    """
    if is_stdin(config.src.path) and is_stdin(config.tgt.path):  # (one stream: the second side would read it empty)
        raise ConfigError("SRC and TGT are both '-': standard input can be one side only")
    # A stream is copied first, so that every check and the kept fields read the same file (was:
    # standard input copied when encoded, and --keep-field refused "-" as no such file).
    streams = {role: side.path for role, side in (("src", config.src), ("tgt", config.tgt))
               if is_url(side.path) or is_stdin(side.path)}
    if not streams:
        return _mine(config, show_progress=show_progress, reported_as=reported_as or {})
    with temporary_directory("stream") as tmp:
        local = {role: replace(getattr(config, role), path=spool_stdin(Path(tmp) / "stdin") if is_stdin(stream)
                               else spool_url(stream, tmp)) for role, stream in streams.items()}
        try:
            return _mine(replace(config, **local), show_progress=show_progress, reported_as=reported_as or {})
        except InputError as e:
            raise as_given(e) from None


def _same_text(src, tgt) -> bool:
    """Whether the two sides are one file read the same way (`reading_of`: was one file, whatever
    was read of it, so a JSON Lines file's `de` and `en` fields, or a TSV's two columns, were
    refused as the same)."""
    a, b = Path(src.path), Path(tgt.path)
    if not (same_file(a, b) or a.resolve() == b.resolve()):
        return False
    if is_stdin(a) or artefact_kind(a, src.input_format) != "text":
        return True
    return reading_of(a, src.input_format) == reading_of(b, tgt.input_format)


def _mine(config: MineConfig, *, show_progress: bool,
          reported_as: Mapping[str, Callable[[CorpusStats], CorpusStats]]) -> dict:
    """`mine` with every side a local path."""
    src, tgt, out = config.src.path, config.tgt.path, config.output.path
    src_lang, tgt_lang = config.src.lang, config.tgt.lang
    projection, search_config, filters = config.encoding.projection, config.search, config.filters.pairs
    if not config.allow_same_input and _same_text(config.src, config.tgt):
        raise ConfigError(f"{src}: given as both SRC and TGT, so every sentence would be mined with itself; "
                          "pass --allow-same-input if that is what you want")
    fmt = resolve_format(out, config.output.format)
    src_format, tgt_format = config.src.input_format, config.tgt.input_format
    sides = ((config.src, "--src-lang"), (config.tgt, "--tgt-lang"))
    if fmt == "tmx":  # before anything is encoded: a text side has no language of its own
        for side, option in sides:
            if side.lang is None and artefact_kind(side.path, side.input_format) == "text":
                raise ConfigError(f"--format tmx names each side's language: give {option}")
    if fmt in ("moses", "tmx") and config.output.line_numbers:  # (was: ignored without a word)
        raise ConfigError(f"--line-numbers: the {fmt} format holds the sentences alone; --meta writes each pair's "
                          "files and lines to OUT.meta, and tsv, jsonl, parquet and hf carry them")
    if fmt == "moses" and not config.output.meta and (config.src.keep_fields or config.tgt.keep_fields):
        raise ConfigError("--keep-field: the moses format holds the sentences alone; add --meta (OUT.meta carries "
                          "the kept fields) or choose a format with columns (tsv, jsonl, parquet, hf, tmx)")
    if src_format is not None and tgt_format is not None:  # each side's own (an option for the other refused)
        src_format, tgt_format = for_each_input(
            [src_format, tgt_format],
            [p if artefact_kind(p, spec) == "text" else None for p, spec in ((src, src_format), (tgt, tgt_format))])
    for (side, option), spec, role in zip(sides, (src_format, tgt_format), ("src", "tgt")):
        if artefact_kind(side.path, spec) == "text":
            check_has_text(side.path, spec)  # an empty TGT: before SRC is encoded
        check_artefact_lang(side.path, side.lang, spec)
        if side.keep_fields:
            kept_field_columns(side.keep_fields, role)
            check_fields_readable(side.path, side.input_format, side.keep_fields, option="--keep-field")
        if side.input_format is not None and side.input_format.split_sentences:  # a missing language: now
            if artefact_kind(side.path, spec) == "embedding-store" and \
                    not (artefact_input(side.path) or {}).get("split_sentences"):
                # (was: whole documents mined against sentences without a word)
                log.warning(f"embedding store {side.path}: made without --split-sentences, so its rows are whole "
                            "records, used as they are (--split-sentences splits the corpora read here; embed it "
                            "again with it to split it)")
            check_split_languages([(side.path, side.lang, option)], side.input_format)
    if config.selection.calibration is not None:  # a wrong file fails now, not after both sides are encoded
        check_calibration_record(config.selection.calibration, threshold_k=(
            search_config.k if config.selection.calibrated else None))
    # Fail before claiming or encoding anything when the product cannot run (cuda without a GPU)
    # or the Ray cluster cannot be joined.
    if not search_config.approximate:
        resolve_product(search_config.product)
    executor = executor_for(search_config.ray)
    overwrite = config.output.overwrite
    # Moses files are named by the languages the pairs carry: a store's or an index's own where none is
    # given (was: OUT.src and OUT.tgt, while jsonl keyed the same pairs de and en)
    named = [side.lang or artefact_lang(side.path) for side in (config.src, config.tgt)]
    companions = (".meta", ".work") + tuple(dict.fromkeys(COMPANIONS + moses_suffixes(*named)))
    keep_filtered = config.output.keep_filtered
    if keep_filtered is not None:  # (else its claim meets the output's own lock: "another process is writing")
        if Path(keep_filtered).suffix.lower() in _NOT_TSV:  # (was: TSV written under a .jsonl name)
            raise ConfigError(f"--keep-filtered {keep_filtered}: it is written as TSV (score, src, tgt, rule), "
                              f"not {Path(keep_filtered).suffix}; name it .tsv")
        written = {Path(f"{out}{suffix}").absolute(): f"OUT{suffix}" for suffix in ("", ".json", *companions)}
        clash = [written[p] for p in (Path(keep_filtered).absolute(), Path(f"{keep_filtered}.json").absolute())
                 if p in written]
        if clash:
            raise ConfigError(f"--keep-filtered {keep_filtered}: it or its summary is {clash[0]} of this command "
                              f"(-o {out}); choose another name")
    encoders = Encoders(config.encoding.encoder_config(), projection, inputs=[src, tgt])
    calibration = config.selection.calibration
    if calibration is not None and artefact_kind(src, src_format) == "text":  # its space: before SRC is encoded
        check_calibration_space(calibration, encoder_name=encoders.encoder.name, projection_dir=encoders.choice.path,
                                encoder_id=encoders.encoder.fingerprint()["id"])
    with contextlib.ExitStack() as claims:
        claim = claims.enter_context(claim_output(out, kind=MINING_KIND, form="tsv", inputs=[src, tgt, projection],
                                                  overwrite=overwrite, companions=companions))
        dropped_claim = None if keep_filtered is None else claims.enter_context(claim_output(
            keep_filtered, kind=FILTERED_KIND, form="tsv", inputs=[src, tgt, projection, out], overwrite=overwrite))
        out = claim.path
        # OUT.work/ is created (and marked as this output's) only when something is built in it, so a
        # run refused while opening its inputs leaves nothing behind.
        work = claim.companion(".work")

        def work_for(path, tag: str, spec) -> Path:
            kind = artefact_kind(path, spec)
            # (an index: its rows reconstructed there, INDEX_ROWS; was: left unmarked, so a store
            # against an index kept a float32 copy of it in OUT.work/ as the user's, and --overwrite failed)
            if kind in ("text", "index") or (projection is not None and kind == "embedding-store"):
                claim.work_dir(".work")
            return work / tag

        # OUT.work/ is this command's own to rebuild (a damaged work store, one of another input) with
        # --overwrite, and whenever OUT holds no finished result: then it is what a failed or
        # interrupted run left, which must not stand in the way of a corrected command.
        rebuild = claim.overwrite or claim.state != "finished"
        sx = load_side(src, lang=src_lang, encoders=encoders, work_dir=work_for(src, "src", src_format),
                       show_progress=show_progress, rebuild=rebuild, input_format=src_format,
                       reported_as=reported_as.get("src"))
        if calibration is not None and artefact_kind(tgt, tgt_format) == "text":  # before TGT is encoded
            check_calibration_space(calibration, encoder_name=sx.encoder.name, encoder_id=sx.encoder.id,
                                    projection_dir=encoders.choice.path if sx.projection else None)
        sy = load_side(tgt, lang=tgt_lang, encoders=encoders, work_dir=work_for(tgt, "tgt", tgt_format),
                       show_progress=show_progress, rebuild=rebuild, input_format=tgt_format,
                       reported_as=reported_as.get("tgt"))
        try:
            check_compatible(sx, sy)
            search = "exact"
            if sx.index is not None or sy.index is not None:
                search = "faiss-index"
            elif search_config.approximate:
                search = "approximate"
            index_notes = [note for side, role in ((sx, "src"), (sy, "tgt")) if side.index is not None
                           and (note := index_side_note(side, role)) is not None]
            if search == "faiss-index" and search_config.approximate:  # (was: dropped without a word)
                index_notes.append("--approximate does not apply: a side that is an index is searched through it")
            for note in index_notes:
                log.warning(note)
            # A threshold rule reads the run's candidates before any threshold (mining/threshold_rule.py);
            # approximate search refines the neighbourhoods around its threshold, before that.
            langs = (src_lang or sx.lang, tgt_lang or sy.lang)
            mining, filters, threshold_record = run_threshold(
                config.selection, config.mining_config(), filters, encoders.choice.path if sx.projection else None,
                sx.encoder.name, rules=RuleUse.APPROXIMATE if search == "approximate" else RuleUse.AFTER_SEARCH,
                langs=langs, encoder_id=sx.encoder.id, side_rows=min(len(sx), len(sy)))
            for side in (sx, sy):  # every shard's sha256 (large stores: now, before any search starts)
                if hasattr(side.rows, "check_all"):
                    side.rows.check_all()
            lf, lf_record = lang_filter_langs(config.filters.lang_filter, langs, filters.lid,
                                              filters.lid_min_confidence)
            forced = lf_record.get("source") == "--lang-filter"
            mx = Mineable(sx, mining, lang_filter=lf[0], forced=forced)
            my = Mineable(sy, mining, lang_filter=lf[1], forced=forced)
            if lf_record["on"]:
                # the input lines of the first sentences it dropped, each side (an audit: true sentences dropped?)
                lf_record["dropped_lines"] = {role: m.other_language_lines for role, m in (("src", mx), ("tgt", my))}
                lf_record["skipped"] = {role: round(m.lang_filter_skipped, 4) for role, m in (("src", mx), ("tgt", my))
                                        if m.lang_filter_skipped is not None}
            # Before the search, so a warning about a mislabelled side comes while it can still be stopped.
            skipped = {role: m for role, m in (("src", mx), ("tgt", my)) if m.lang_filter_skipped is not None}
            # (a list given to xmine.mine: named as the list, not its temporary file; was "tgt tgt (the list given)")
            shown = {role: reported_as[role](CorpusStats(path=side.path)).path if role in reported_as else
                     f"{role} {side.path}" for role, side in (("src", sx), ("tgt", sy))}
            language_check = check_declared_languages([("src", sx, mx.ids, src_lang), ("tgt", sy, my.ids, tgt_lang)],
                                                      encoders=encoders, warned=skipped, shown=shown)
            for role, m in skipped.items():
                note_side_left(role, shown[role], m.lang_filter_skipped, lf[0 if role == "src" else 1][0],
                               language_check.get(role))
            untrained = untrained_languages(sx.encoder.name, [lang for lang in langs if lang != UNDETERMINED])
            # (use-m3, FLORES devtest nl-sv: 12% of the translations found; fr-es and it-pt: 88-91%)
            if untrained:
                untrained_note = (f"{sx.encoder.name} was not trained on {', '.join(untrained)} (`xmine encoders` lists "
                                  "its languages): it aligns translations of such a language poorly, so few of them "
                                  "are found; an encoder that knows the language (me5-small) finds more")
                log.warning(untrained_note)
            unseen = unseen_languages(sx.projection, [lang for lang in langs if lang != UNDETERMINED])
            if unseen:  # (was: a projection trained on de-en mined fr-es without a word)
                unseen_note = (f"{unseen_languages_note(sx.projection.path, unseen)}; `xmine bench tatoeba --projection "
                               f"{sx.projection.path}` measures it, and `--projection none` mines raw embeddings")
                log.warning(unseen_note)
            pre_record = pre_search(mx, my, langs=langs, config=config.filters.pre_clean, filters=filters,
                                    margin=mining.margin)
            # Length bounds were applied above; the selection only needs the ratio filter (and no
            # threshold where a rule gives it after the search).
            rule = threshold_record.get("rule")
            select_config = mining.replace(min_length=0, max_length=None,
                                           threshold=mining.threshold if rule is None else None)
            key = hashlib.sha256(json.dumps(
                [sx.fingerprint_key(), sy.fingerprint_key(), mining.k, mining.block_rows, mining.block_cols,
                 mining.min_length, mining.max_length, lf, pre_record], default=str).encode()).hexdigest()
            approximate_config, approximate_used = search_config.approximate_config(), {}
            if search != "faiss-index":
                claim.work_dir(".work")  # checkpoints
            try:
                mined = search_pairs(search, mx, my, sx, sy, config=mining, select_config=select_config,
                                      approximate_config=approximate_config, work=work, key=key, executor=executor,
                                      show_progress=show_progress, used=approximate_used)
            except NonFiniteRowError as e:
                side, mineable = (sx, mx) if e.side == "src" else (sy, my)
                row = int(mineable.ids[e.row])
                raise InputError(side.path, NonFiniteRowError.of_store_row(row, int(side.line_numbers[row]))) from None
            if search == "approximate" and rule is not None and approximate_config.refine:  # (was: unsaid)
                approximate_used["refined"] = ("no: the threshold is estimated from the run's candidates after the "
                                               "search, so none chose what to refine; give --threshold to refine")
                log.warning(f"--approximate: {approximate_used['refined']}")
            if rule is not None:
                mined = apply_run_threshold(mined, threshold_record)
                mining = mining.replace(threshold=threshold_record["value"])  # what the provenance records
            note_few_neighbours(threshold_record, {"target side": len(my.ids), "source side": len(mx.ids)}, mining.k,
                                remedy="`--threshold none` keeps every pair with its margin")
            note_cap_not_above(threshold_record, filters, mining.margin)
            src_rows, tgt_rows = mx.ids[mined.src_idx], my.ids[mined.tgt_idx]
            take, src_rows, tgt_rows, pre_record["number_variants_paired"] = pair_number_variants(
                src_rows, tgt_rows, mx.number_variants, my.number_variants, sx.text, sy.text)
            mined = mined.take(take)
            # A side the language filter found mostly in another language is not judged by language
            # again after the search (its declared language is in doubt: the warning said so).
            pair_langs = tuple(None if m.lang_filter_skipped is not None else lang for m, lang in zip((mx, my), langs))
            mined, src_rows, tgt_rows, filter_record, lid_columns = filter_pairs(
                mined, sx, sy, src_rows, tgt_rows, langs=pair_langs, config=filters, margin=mining.margin,
                dropped_claim=dropped_claim, line_numbers=config.output.line_numbers)
            summary = {
                "output": str(out), "format": fmt, "pairs": len(mined),
                # a source's neighbours are targets and a target's are sources: where one side is
                # smaller than k, the other side's sentences have that many; k_used is the least
                "k_used": min(mining.k, len(mx.ids), len(my.ids)),
                "k_used_per_side": {"src": min(mining.k, len(my.ids)), "tgt": min(mining.k, len(mx.ids))},
                **{role: {"path": shown_path(side.path), "kind": side.kind,
                          # a corpus's format (kind "text": any corpus xmine encodes, not only a text file)
                          **({"format": side.fingerprint.get("format", "text")} if side.kind == "text" else {}),
                          "sentences": len(side), "unique": m.unique,
                          **({"encoded_with": side.encoded_with} if side.encoded_with else {}),
                          "mined_rows": len(m.ids), "other_language": m.other_language if lf_record["on"] else None}
                   for role, side, m in (("src", sx, mx), ("tgt", sy, my))},
                "lang_filter": lf_record,
                "pre_search": pre_record,
                "encoder": sx.encoder.to_dict(), "projection": to_json(sx.projection), "part": sx.part,
                "projection_choice": encoders.choice.record(),
                "threshold": threshold_record,
                # No estimator of the kept pairs' precision from the run's own scores has come within
                # +-0.05 of the truth on held-out sets yet (docs/mining.md), so none is given.
                "estimated_precision": "not estimated",
                "filters": filter_record,
                # --max-length-ratio, before one-to-one matching (was: counted nowhere, and only the
                # pair filter's length_ratio bound shown)
                **({"max_length_ratio": {"bound": mining.max_length_ratio,
                                         "candidates_dropped": mined.length_ratio_dropped}}
                   if mining.max_length_ratio is not None else {}),
                "language_check": language_check,
                **({"index_notes": index_notes} if index_notes else {}),
                **({"encoder_languages": {"untrained": untrained, "note": untrained_note}} if untrained else {}),
                **({"projection_languages": {"unseen": unseen, "note": unseen_note}} if unseen else {}),
                "search": search,
                # the indexes the approximate search built (was: only the settings as given, nlist None)
                **({"approximate_index": approximate_used} if approximate_used else {}),
                "ray": search_config.ray,
                # (Ray's tasks resolve "auto" on their workers: the driver's choice is no record of theirs)
                "product": (None if search != "exact" else
                            "auto, resolved by each Ray task on its worker (CPU: they ask for no GPU)"
                            if search_config.ray and mining.product == "auto" else resolve_product(mining.product)),
                "score_quantiles": ({q: float(np.quantile(mined.score, q)) for q in (0.1, 0.5, 0.9)}
                                    if len(mined) else {}),
                # the languages mined as: a store's own where none was given, as score records them
                "provenance": provenance(**asdict(mining), src_lang=given_or_recorded(src_lang, sx.lang),
                                         tgt_lang=given_or_recorded(tgt_lang, sy.lang),
                                         keep_fields={"src": list(config.src.keep_fields),
                                                      "tgt": list(config.tgt.keep_fields)},
                                         approximate=(asdict(approximate_config) if search == "approximate" else None),
                                         inputs=[sx.fingerprint, sy.fingerprint]),
            }
            sides_rows = (("src", sx, src_rows, src_format, config.src.keep_fields),
                          ("tgt", sy, tgt_rows, tgt_format, config.tgt.keep_fields))
            kept = any(names for *_, names in sides_rows)
            # the kept values are read into a file beside the output, not memory (see record_fields);
            # one left by a run killed while it wrote goes, whether this run keeps fields or not (was:
            # only when it did, so --keep-work kept it)
            remove_work(work, only="fields-*")
            if kept:
                claim.work_dir(".work")
            with (tempfile.TemporaryDirectory(dir=work, prefix="fields-") if kept else
                  contextlib.nullcontext()) as fields_dir:
                fields = [PairColumn(name=column, values=values)
                          for role, side, rows, spec, names in sides_rows if names
                          for column, values in zip(kept_field_columns(names, role),
                                                    record_fields(side.path, spec, names, side.line_numbers[rows],
                                                                  fields_dir))]
                write_mined(claim, fmt, MinedRows(sx=sx, sy=sy, src_rows=src_rows, tgt_rows=tgt_rows,
                                                  score=mined.score, direction=mined.direction),
                            line_numbers=config.output.line_numbers, summary=summary, extra=lid_columns, fields=fields)
                if config.output.meta:  # (without it, the replaced result's own .meta is removed by claim.finish)
                    write_meta(claim, mined, sx, sy, src_rows, tgt_rows, fields=fields)
                for column in fields:
                    column.values.lines.close()
        finally:
            sx.close()
            sy.close()
        if not config.output.keep_work:
            discard_work(work)
        body = claim.finish(summary)
        # --keep-filtered's file is finished after OUT (was: before OUT was written, so that a run
        # stopped in between was refused when run again: "already exists", OUT not there)
        if dropped_claim is not None:
            dropped_claim.finish(dropped_summary(filter_record, len(mined), sx, sy))
        return body
