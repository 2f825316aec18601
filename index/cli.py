"""`xmine build-index` and `xmine search`."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from pathlib import Path
import tempfile

import click
import numpy as np

from xmine.artefacts.directory import provenance
from xmine.artefacts.input_artefacts import artefact_kind
from xmine.errors import ConfigError, InputError, NonFiniteRowError
from xmine.encoders import EncoderConfig, check_same_encoder
from xmine.encoders.options import precision_option
from xmine.exec.executor import executor_for
from xmine.index.blocked_search import IndexDirShards, search_blocks
from xmine.index.build import IndexConfig, build_index as _build
from xmine.index.choose import BUILD_TYPES, pq_code
from xmine.index.faiss_index import IndexDir, gpu_count
from xmine.encoders.input_encoders import Encoders, check_same_projection
from xmine.encoders.projection import warn_of_unseen_languages
from xmine.inputs import check_split_languages, load_side
from xmine.io.readers import for_each_input
from xmine.io.stdin import recorded_path, with_local_inputs
from xmine.options import (LANG, NAME, PROJECTION_CHOSEN, SEED, ExistingPath, Finite, GivenPath, InputPath,
                           given_on_command_line, input_format_options, projection_option, quiet_option,
                           ray_option, refuse_overwrite_without_output)
from xmine.artefacts.output_state import check_named_format, names_another_format
from xmine.artefacts.outputs import claim_output
from xmine.store.rows import RowSubset

log = logging.getLogger(__name__)


def _corpus_format(path: Path | str, input_format):
    """`input_format` for a corpus input, None for a store or an index, where a reading option given is
    refused (was: `search IDX STORE --split-sentences` ignored it without a word)."""
    return for_each_input([input_format], [path if artefact_kind(path, input_format) == "text" else None])[0]


@click.command("build-index")
@click.argument("source", type=InputPath())
@click.option("-o", "--out", "out_dir", required=True, type=GivenPath(path_type=Path),
              help="Index directory to write. It must be new, an empty directory or (with --overwrite) an "
                   "xmine index, which is then replaced atomically; anything else is refused.")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it is an xmine index already.")
@click.option("--lang", type=LANG, default=None, help="Language code of the corpus (recorded; checked against a store's). Default: a store's, else none "
                   "recorded.")
@click.option("--index-type", "kind", type=click.Choice(BUILD_TYPES), default="auto", show_default=True,
              help="flat: exact inner product; ivf: IVF lists with exact vectors; hnsw: graph index "
                   "(fast, memory-hungry, CPU only); ivfpq: IVF with product-quantised vectors; opq: "
                   "OPQ rotation + IVF + PQ (stopes' choice for big corpora); auto: Flat up to 10k "
                   "vectors, HNSW while it fits the memory budget (no GPU), else OPQ/IVF/PQ with lists "
                   "by corpus size. The chosen index and the reason are printed.")
@click.option("--shard-rows", type=click.IntRange(min=1), default=None,
              help="Split the index into shards of this many rows (each its own .faiss file), for "
                   "corpora whose index does not fit in memory at once; searches merge the shards' top-k (the hits of "
                   "one index, but for ties at the k-th and the last digit of a score). Default: one index while it "
                   "fits the memory budget (--memory-budget-gb), else equal shards that each fit it.")
@click.option("--nlist", type=click.IntRange(min=1), default=None,
              help="IVF lists (default: by corpus size, 4-16 x sqrt(N), and fewer where a list would train on < 39 "
                   "vectors).")
@click.option("--nprobe", type=click.IntRange(min=1), default=None,
              help="IVF lists searched per query, recorded as the index default (default: a quarter of the lists, at "
                   "least 8 (all of fewer), at most 128).")
@click.option("--pq-m", type=click.IntRange(min=1), default=None,
              help="PQ sub-quantisers = bytes per stored vector (ivfpq/opq); must divide the dimension "
                   "(the largest divisor below it is used, and said). [default: 64]")
@click.option("--memory-budget-gb", type=Finite(0.001, 1e6), default=None,
              help="Memory the index (or each shard) may take, in GiB from 0.001 to 1000000: --index-type auto "
                   "chooses the index by it, and without --shard-rows a larger index is split into shards that "
                   "each fit it. Default: a quarter of RAM.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the training sample.")
@click.option("--encoder", type=NAME, default=None,
              help="Encoder for a text SOURCE (default: the one a --projection DIR was trained on, else me5-small); "
                   "for a store, must match the store's.")
@projection_option("to index in", default=f"{PROJECTION_CHOSEN} A store SOURCE keeps the projection it was made "
                                          "with unless one is given.")
@precision_option(default_from="the precision of a store SOURCE")
@click.option("--cpu", is_flag=True, help="Do not use GPUs even if FAISS reports some.")
@quiet_option(help="No progress bars.")
@input_format_options(ids=False)
@ray_option("the build: training in one task, adding rows in parallel tasks (each shard a task with "
            "--shard-rows, else pieces merged into one index). A store SOURCE is read by the workers from "
            "its files; a text SOURCE is encoded here first (embed it with `xmine embed --ray` to encode "
            "on the cluster). The index is the same as without --ray")
@with_local_inputs("source")  # a URL: copied as it streams (`-` is copied where the text is embedded)
def build_index(source, out_dir, overwrite, lang, kind, shard_rows, nlist, nprobe, pq_m, memory_budget_gb, seed,
                encoder, projection, precision, runtime, prompt, prompt_name, device, cpu, quiet, ray_address,
                input_format):
    """Build a FAISS index over SOURCE's embeddings.

    SOURCE is a corpus in any input format (a text file with one sentence a line, JSON Lines, CSV,
    Parquet, a dataset folder; see --input-format; '-' reads standard input, an fsspec URL one
    file, each copied first), encoded with --encoder into a temporary store, or an embedding store
    directory written by `xmine embed` (its stored vectors are used), or another index (its vectors,
    to index them another way; not one of PQ codes, which decode only approximately). The index directory records
    the encoder and projection fingerprints and the sentences with their line numbers, so
    `xmine search` returns text and refuses queries from another encoder/projection.
    """
    input_format = _corpus_format(source, input_format)
    if input_format is not None and input_format.split_sentences:  # a missing language fails before anything is written
        check_split_languages([(source, lang, "--lang")], input_format)
    # options the chosen kind has no use for (was: accepted and dropped without a word)
    unused = [o for o in given_on_command_line("memory_budget_gb") if kind != "auto" and shard_rows] + \
        [o for o in given_on_command_line("seed") if kind in ("flat", "hnsw")]
    if unused:
        raise ConfigError(f"{' and '.join(unused)}: --index-type {kind}{' with --shard-rows' * bool(shard_rows)} has "
                          f"no use for {'it' if len(unused) == 1 else 'them'} (the memory budget chooses the index of "
                          "--index-type auto and, without --shard-rows, the size of the shards; the seed draws the "
                          "training sample of an index with lists or PQ codes)")
    # the settings checked before anything is claimed or embedded (was: after the corpus was embedded)
    config = IndexConfig(kind=kind, shard_rows=shard_rows, nlist=nlist, nprobe=nprobe, pq_m=pq_m, seed=seed,
                         gpu=not cpu, memory_budget=int(memory_budget_gb * 2**30) if memory_budget_gb else None)
    # (was: built from the decoded vectors, an index its own reader then called damaged)
    if _pq_codes(source_index := _index_at(source, input_format)):
        made = (source_index.manifest.source or {}).get("path")
        raise InputError(source, f"an index of PQ codes ({source_index.manifest.choice.factory}), which decode only "
                                 "approximately, so an index built from them would hold other vectors than the "
                                 "sentences'; build from the embedding store or corpus it was made from"
                                 + (f" ({made})" if made else ""))
    executor = executor_for(ray_address)  # join the cluster first: a wrong address fails before any work
    with claim_output(out_dir, kind="index", form="dir", inputs=[source, projection], overwrite=overwrite):
        encoders = Encoders(EncoderConfig(name=encoder, precision=precision, runtime=runtime, prompt=prompt,
                                          prompt_name=prompt_name, device=device), projection, inputs=[source])
        # A text SOURCE is embedded into a store (a raw store projected) in a hidden temporary
        # directory beside the index, removed at the end.
        with tempfile.TemporaryDirectory(prefix=f".{Path(out_dir).name}.work-", dir=Path(out_dir).parent) as work:
            side = load_side(source, lang=lang, encoders=encoders, work_dir=work, show_progress=not quiet,
                             input_format=input_format, opened=source_index)
            if hasattr(side.rows, "check_all"):
                side.rows.check_all()  # a damaged shard is one clear error before the indexing starts
            warn_of_unseen_languages(side.projection.path if side.projection else None, [side.lang])
            try:
                ix = _build(side.rows, out_dir, sentences=side.text.path, line_numbers=side.line_numbers,
                            sentence_index=side.sentence_index, encoder=side.encoder, projection=side.projection,
                            part=side.part, lang=side.lang,
                            source={"kind": side.kind, **({"file": side.fingerprint} if side.kind == "text" else
                                                           {"path": str(Path(source).resolve()), **side.fingerprint}),
                                    "corpus": recorded_path(side.source or side.path),  # what line numbers count in
                                    **({"encoded_with": side.encoded_with} if side.encoded_with else {})},
                            config=config, executor=executor, show_progress=not quiet, overwrite=overwrite)
            except NonFiniteRowError as e:  # a damaged or crafted store (was: indexed, and every search missed)
                raise InputError(source, NonFiniteRowError.of_store_row(e.row, int(side.line_numbers[e.row]))) from None
            finally:
                side.close()
    m = ix.manifest
    click.echo(f"indexed {len(ix):,} sentence{'s' * (len(ix) != 1)} ({ix.dim}-d, {side.part}) into {out_dir}: {m.choice.factory} "
               f"in {len(m.shards)} shard(s)" + (" on GPU" if m.built_on_gpu else ""), err=True)
    click.echo(f"  why: {m.choice.reason}", err=True)


@click.command("search")
@click.argument("index_dir", type=ExistingPath(file_okay=False))
@click.argument("queries", type=InputPath())
@click.option("-k", "--k", type=click.IntRange(min=1), default=10, show_default=True, help="Neighbours returned per query.")
@click.option("--format", "fmt", type=click.Choice(["tsv", "jsonl"]), default=None,
              help="Default: jsonl for an OUT named .jsonl or .ndjson, tsv for any other name but one of another format "
                   "(.json, .csv, .parquet, ...: refused) or a compressed one (refused: search writes plain "
                   "text). tsv: one hit a line: query_line, rank, "
                   "score, hit_line, hit_sentence; when the queries or "
                   "the index were split into sentences (--split-sentences), then query_sentence_index and "
                   "hit_sentence_index (1-based in their record; empty for a side not split). "
                   "jsonl: one object per query with its hits (and those indices).")
@click.option("-o", "--out", type=GivenPath(dir_okay=False, path_type=Path), default=None,
              help="Write the results here (atomically) instead of standard output, with a summary in "
                   "OUT.json that marks the file as xmine's. An existing OUT is replaced only if it is an "
                   "earlier search result and --overwrite is given.")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it is an earlier xmine search result.")
@click.option("--nprobe", type=click.IntRange(min=1), default=None, help="IVF lists to visit (default: the index's own).")
@click.option("--encoder", type=NAME, default=None,
              help="Encoder for the queries (default: the index's); another encoder is refused.")
@projection_option("of the queries", default="Default: the one the index was made with (the shipped default "
                                               "projection, raw, or else it must be given); another one is refused.")
@precision_option(default_from="the index's precision")
@click.option("--lang", type=LANG, default=None,
              help="Language code of QUERIES: needed to split them with --split-sentences; for a store or index "
                   "of queries, checked against the language it records.")
@quiet_option(help="No progress bars (encoding the queries, searching them).")
@input_format_options(ids=False)
@with_local_inputs("queries")  # a URL: copied as it streams
def search(index_dir, queries, k, fmt, out, overwrite, nprobe, encoder, projection, precision, runtime, prompt,
           prompt_name, device, lang, quiet, input_format):
    """Return the K nearest indexed sentences of every sentence of QUERIES, with cosine scores.

    QUERIES is a corpus (text, one sentence a line, or records: see --input-format; `-` reads
    standard input, a URL is copied as it streams), encoded as the index was, or an embedding store or index of the same space
    (their stored vectors are used, as made: no encoder is loaded).

    Scores are inner products of L2-normalised embeddings (cosine; for exact indexes) or FAISS's
    estimate of it (PQ indexes), held to -1..1 (stored rows are unit length to about 1e-4).
    """
    refuse_overwrite_without_output(overwrite, out)
    fmt = _search_format(out, fmt)
    input_format = _corpus_format(queries, input_format)
    if input_format is not None and input_format.split_sentences:  # a missing language fails before anything is written
        check_split_languages([(queries, lang, "--lang")], input_format)
    elif lang is not None and input_format is not None:  # text queries (was: taken without a word)
        # (a store's or index's own language is checked against it instead: was said to be ignored, then refused)
        log.warning(f"--lang {lang}: used only to split the queries into sentences (--split-sentences); ignored")
    with (claim_output(out, kind="search-result", form="tsv", inputs=[index_dir, queries, projection],
                       overwrite=overwrite) if out is not None else contextlib.nullcontext()) as claim:
        encoder = EncoderConfig(name=encoder, precision=precision, runtime=runtime, prompt=prompt,
                                prompt_name=prompt_name, device=device)
        summary = _search(index_dir, queries, k, fmt, claim, nprobe, encoder, projection, input_format, lang,
                          show_progress=not quiet)
        if claim is not None:
            claim.finish(summary)
    if out is not None:  # (was: nothing said, where mine, embed and build-index say what they wrote)
        each = (f"{summary['k_used']} nearest each" if summary["fewest_hits"] in (None, summary["k_used"]) else
                f"up to {summary['k_used']} nearest each, at least {summary['fewest_hits']}")  # (was: k, said as got)
        click.echo(f"searched {summary['queries_searched']:,} queries against {index_dir} ({each}) -> {out}", err=True)


def _index_at(path, input_format=None) -> IndexDir | None:
    """The index at `path`, opened (and so checked) once, for `load_side` to take; None for anything else."""
    return IndexDir.open(path) if artefact_kind(path, input_format) == "index" else None


def _pq_codes(ix: IndexDir | None) -> bool:
    """Whether `ix` stores PQ codes, which decode only approximately (not unit length, not the sentences' vectors)."""
    return ix is not None and pq_code(ix.manifest.choice.factory) is not None


def _search_format(out: Path | None, fmt: str | None) -> str:
    """The format named, else by OUT's name (.jsonl: jsonl), else tsv; a compressed name (.gz, .xz,
    .bz2, .zst) is refused: search writes plain text (was: TSV written under a .jsonl or .gz name)."""
    if out is not None and out.name.lower().endswith((".gz", ".xz", ".bz2", ".zst")):
        raise ConfigError(f"{out}: search writes plain text, not compressed; name it without {out.suffix} (or pipe "
                          "the standard output through a compressor)")
    named = {".jsonl": "jsonl", ".ndjson": "jsonl", ".tsv": "tsv"}.get(out.suffix.lower()) if out is not None else None
    if fmt is not None:
        check_named_format(out, fmt, named)  # (was: JSON Lines written into hits.tsv without a word)
        return fmt
    if out is not None and names_another_format(out, named):  # (was: TSV written as hits.parquet)
        raise ConfigError(f"{out}: search writes tsv and jsonl, not what its name says; name it .tsv or .jsonl "
                          "(or give --format)")
    return named or "tsv"


def _search(index_dir, queries, k, fmt, claim, nprobe, encoder: EncoderConfig, projection, input_format=None,
            lang=None, *, show_progress: bool = False) -> dict:
    from tqdm.auto import tqdm

    ix = IndexDir.open(index_dir)
    if nprobe is not None and not ix.manifest.choice.nlist:  # (was: recorded as used, and ignored)
        raise ConfigError(f"--nprobe: index {index_dir} is {ix.manifest.choice.factory}, which has no IVF lists")
    if nprobe is not None and nprobe > ix.manifest.choice.nlist:  # (was: recorded as used, 1000 of 294 lists)
        log.warning(f"--nprobe {nprobe}: {ix.manifest.choice.nlist} used (a query visits at most every list of the "
                    "index)")
        nprobe = ix.manifest.choice.nlist
    if k > len(ix):  # (was: said only as "50 nearest each" in the closing line)
        log.warning(f"-k {k:,}: {len(ix):,} used (the index holds {len(ix):,} sentence{'' if len(ix) == 1 else 's'})")
    encoders = Encoders(encoder, projection, inputs=[index_dir])
    if artefact_kind(queries, input_format) == "text":  # before any is encoded
        check_same_encoder(ix.encoder, encoders.encoder.fingerprint(), what=f"index {index_dir}")
        check_same_projection(ix.manifest.projection, encoders.projection_fp(), what=f"index {index_dir}")
    # (was: scored without a word, a sentence's hit on itself at 0.88-0.90)
    if _pq_codes(queries_index := _index_at(queries, input_format)):
        log.warning(f"queries {queries}: an index of PQ codes ({queries_index.manifest.choice.factory}), so every "
                    "score is computed on decoded vectors, lower than the sentences' own; give the embedding store or "
                    "corpus it was made from for exact scores")
    q = load_side(queries, lang=lang, encoders=encoders, show_progress=show_progress,  # in a temporary store
                  input_format=input_format, opened=queries_index)
    # Queries given as a store or an index were embedded elsewhere, with no encoder to load here (was:
    # loaded anyway, so vectors of `embed --embeddings` could not be searched): their encoder run
    # (prompt, precision, runtime) and projection must be the index's, or the scores compare two spaces.
    check_same_encoder(ix.encoder, q.encoder, what=f"index {index_dir} (vs queries {queries})")
    check_same_projection(ix.manifest.projection, q.projection, what=f"index {index_dir} (vs queries {queries})")
    hits_text, _ = ix.text_column()
    lines = ix.line_numbers
    hit_sent, q_sent = ix.sentence_index, q.sentence_index
    split = hit_sent is not None or q_sent is not None
    n_queries = len(q)
    with contextlib.ExitStack() as stack:
        if claim is not None:
            tmp = stack.enter_context(claim.atomic_file())
            sink = stack.enter_context(open(tmp, "w", encoding="utf-8", newline="\n"))
        else:
            sink = sys.stdout
        stack.callback(q.close)
        # (entered after the output: the bar ends its line before an error is printed)
        bar = stack.enter_context(tqdm(total=len(q), desc=f"searching {ix.manifest.choice.factory}", unit=" queries",
                                       disable=not show_progress, leave=False))
        written, fewest = 0, None  # fewest hits a query got
        shards = IndexDirShards(ix)
        # Runs of queries, each searched shard by shard (every shard read once per run), then
        # written: memory holds one run's hits, not all of them. There are no more hits than
        # indexed rows, and a run holds at most _SEARCH_HITS of them, whatever -k asks.
        k_used = max(1, min(k, len(ix)))
        run_rows = max(1, min(_SEARCH_RUN, _SEARCH_HITS // k_used))
        for start in range(0, len(q), run_rows):
            run = RowSubset(q.rows, np.arange(start, min(len(q), start + run_rows)))
            sims, rows = search_blocks(shards, len(shards), run, k_used, nprobe=nprobe,
                                       use_gpu=gpu_count() > 0)
            for off in range(len(sims)):
                qi = start + off
                # held to [-1, 1]: rows stored in float16 are unit length to about 1e-4 (was: 1.000076)
                hits = [(r + 1, min(1.0, max(-1.0, float(s))), int(lines[j]), hits_text[j],
                         int(hit_sent[j]) if hit_sent is not None else None)
                        for r, (s, j) in enumerate(zip(sims[off], rows[off])) if j >= 0]
                fewest = len(hits) if fewest is None else min(fewest, len(hits))
                ql = int(q.line_numbers[qi])
                qs = int(q_sent[qi]) if q_sent is not None else None
                if fmt == "tsv":
                    tail = (lambda hs: f"\t{'' if qs is None else qs}\t{'' if hs is None else hs}") if split else \
                        (lambda hs: "")
                    sink.write("".join(f"{ql}\t{rank}\t{s:.6f}\t{line}\t{t}{tail(hs)}\n"
                                       for rank, s, line, t, hs in hits))
                    written += len(hits)
                else:
                    record = {"query_line": ql, **({"query_sentence_index": qs} if qs is not None else {}),
                              "query": q.text[qi], "hits": [
                        {"rank": rank, "score": round(s, 6), "line": line, "sentence": t,
                         **({"sentence_index": hs} if hs is not None else {})}
                        for rank, s, line, t, hs in hits]}
                    sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                    written += 1
            bar.update(len(sims))
    choice = ix.manifest.choice
    if fewest is not None and fewest < k_used:
        if choice.nlist:  # an IVF index returns only the rows of the lists it visits
            why = (f"the index searches {choice.nprobe if nprobe is None else nprobe} of its {choice.nlist} lists a "
                   "query; a larger --nprobe returns more")
        else:  # (was: the IVF advice for HNSW too, whose --nprobe is refused)
            why = (f"a {choice.factory} index returns the neighbours its search reaches, not every row; a flat "
                   "index (build-index --index-type flat) returns k")
        log.warning(f"some queries got fewer than k={k_used} hits (the fewest {fewest}): {why}")
    if claim is None:
        return {}
    return {"index": str(index_dir), "queries": str(queries), "format": fmt, "k": k,
            "k_used": min(k, len(ix)), "fewest_hits": fewest, "lines": written, "queries_searched": n_queries,
            "provenance": provenance(index=str(index_dir), queries=str(queries), k=k, nprobe=nprobe, format=fmt)}


#: Queries searched in every shard before their hits are written (one run's hits in memory).
_SEARCH_RUN = 1 << 20
#: Hits (query x rank) held at once: 12 bytes each.
_SEARCH_HITS = 64 << 20


COMMANDS = [build_index, search]
