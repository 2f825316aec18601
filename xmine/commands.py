"""`xmine encoders` and `xmine embed`: list the encoders; turn a text file into an embedding store."""

from __future__ import annotations

import contextlib
import platform
import sys
import time

import click

from xmine.io.corpus import DEFAULT_MAX_CHARS
from xmine.encoders.embed_cache import cache_file_info, cache_files, max_cache_mb, remove_cache_file
from xmine.encoders import cpu_bf16_flag, list_encoders, load_encoder
from xmine.encoders.external import ExternalEmbeddings

from xmine.encoders.runtime import openvino_installed, runtime_for_artefact, x86_cpu
from xmine.encoders.suitability import suitability
from xmine.errors import ArtefactError, ConfigError, InputError, XmineError, error_lines
from xmine.encoders.options import encodes_nothing, precision_option
from xmine.artefacts.input_artefacts import artefact_encoder, artefact_projection, encoding_prompt, projection_encoder
from xmine.artefacts.fileio import kind_label
from xmine.options import (LANG, NAME, GivenPath, given_on_command_line, input_format_options, projection_option,
                           quiet_option, ray_option)
from xmine.paths import xmine_home
from xmine.encoders.projection import choose_projection, warn_of_unseen_languages
from xmine.io.stdin import as_given, is_stdin, is_url, spool_stdin, spool_url
from xmine.store import embed_corpus
from xmine.store.layout import DEFAULT_DTYPE, DTYPES
from xmine.artefacts.verify import verify_artefact
from xmine.tempdirs import temporary_directory

@click.command("encoders")
@click.option("--check", "check_name", type=NAME, default=None, metavar="NAME",
              help="Check that encoder NAME (a name or model path) can mine: 48 FLORES-200 sentences in German, "
                   "Russian, Chinese and Arabic mined against their English translations; says the share found "
                   "(a warning below 80%). Also run, once per encoder, on the first use of any encoder xmine does "
                   "not ship.")
@precision_option()
def encoders(check_name, precision, runtime, prompt, prompt_name, device) -> None:
    """List the sentence encoders xmine knows and whether they can run on this machine.

    Besides these names, --encoder accepts any sentence-transformers model name or local path.
    With --check NAME: measure whether that encoder aligns translations.
    """
    if check_name is None and (given := given_on_command_line("precision", "runtime", "prompt", "prompt_name", "device")):
        # the list says what each encoder can do, not how one would run: these need --check
        raise ConfigError(f"{', '.join(given)}: options of running an encoder, which go with --check NAME")
    if check_name is not None:
        verdict = suitability(load_encoder(check_name, precision=precision, runtime=runtime, prefix=prompt,
                                           prompt_name=prompt_name, device=device, check=False),
                              fresh=True)
        if verdict.suitable:
            click.echo(verdict.describe())
        else:
            click.secho(f"xmine: warning: {verdict.describe()}", fg="yellow", err=True)
        return

    rows = list_encoders()
    width = max(len(str(r.get("name", ""))) for r in rows)
    for r in rows:
        dim = r.get("dim")
        why = r.get("why_not") or r.get("reason") or "unknown reason"
        status = "available" if r.get("available") else f"NOT AVAILABLE: {why}"
        click.echo(f"{str(r.get('name', '')).ljust(width)}  dim {dim if dim else '-':<4}  {status}")
        for label, key in (("", "description"), ("languages: ", "languages"), ("note: ", "note")):
            if r.get(key):
                click.echo(click.wrap_text(f"{label}{r[key]}", width=100, initial_indent="    ",
                                           subsequent_indent="    "))
    click.echo()
    click.echo(describe_auto_precision())
    click.echo(describe_auto_runtime())

def describe_auto_runtime() -> str:
    """One line: what --runtime auto means for transformer encoders on this machine's CPU, and why."""
    if not x86_cpu():
        return f"--runtime auto on this CPU: torch (OpenVINO is used on x86 CPUs; this is {platform.machine()})"
    if not openvino_installed():
        return "--runtime auto on this CPU: torch (the openvino package is not installed: pip install openvino)"
    return "--runtime auto on this CPU: openvino at fp32/bf16/int8 (torch for fp16 and on CUDA)"

def describe_auto_precision() -> str:
    """One line: what --precision auto means on this machine, and why."""
    flag = cpu_bf16_flag()
    line = ("--precision auto on this CPU: " + (f"bf16 (native bf16: {flag} in /proc/cpuinfo)" if flag else
                                                 "fp32 (no avx512_bf16/amx_bf16 in /proc/cpuinfo)"))
    try:
        import torch

        if torch.cuda.is_available():
            line += "; on CUDA: " + ("bf16" if torch.cuda.is_bf16_supported() else "fp16 (no bf16 on this GPU)")
    except ImportError:
        pass
    return line

@click.command("embed")
@click.argument("corpus", type=click.Path(dir_okay=True, path_type=str))
@click.option("--lang", type=LANG, required=True, help="Language code of the corpus (e.g. de), recorded in the store.")
@click.option("-o", "--out", "out_dir", required=True, type=GivenPath(file_okay=False, path_type=str),
              help="Store directory to create (or to resume, or to return at once if already finished).")
@click.option("--encoder", "encoder_name", type=NAME, default="me5-small", show_default=True,
              help="Encoder name (see `xmine encoders`) or any sentence-transformers model name/path; with "
                   "--projection DIR, the encoder that projection was made for unless given.")
@projection_option("to embed in (its --part is stored)")
@click.option("--part", type=click.Choice(["meaning", "language"]), default="meaning", show_default=True,
              help="Which part of the projection to store ('language' needs one: the shipped one of me5-small, or "
                   "--projection).")
@click.option("--dtype", type=click.Choice(DTYPES), default=DEFAULT_DTYPE, show_default=True,
              help="On-disk precision: float16 halves the size (error ~1e-3 on unit vectors).")
@click.option("--batch-size", type=click.IntRange(min=1), default=64, show_default=True,
              help="Sentences per encoder batch.")
@click.option("--shard-rows", type=click.IntRange(min=1), default=50_000, show_default=True,
              help="Sentences per shard file; also the unit of resuming after an interruption.")
@click.option("--max-chars", type=click.IntRange(min=1), default=DEFAULT_MAX_CHARS, show_default=True,
              help="Cut longer lines to this many characters for encoding (the stored text stays whole).")
@click.option("--overwrite", is_flag=True,
              help="Rebuild the store (or discard an interrupted run) made from another input or settings, "
                   "instead of refusing.")
@precision_option(default_from="the precision of the finished store OUT (not with --overwrite)")
@quiet_option(help="No progress bar.")
@click.option("--embeddings", "embeddings_file", default=None, type=click.Path(path_type=str), is_eager=True,
              callback=encodes_nothing,
              help="Store these embeddings made elsewhere instead of encoding: LASER's raw .f32/.f16 rows (with "
                   "--dim), a .npy array, a Parquet file or Hugging Face save_to_disk folder (--embeddings-column); "
                   "one row per line of CORPUS (or per non-empty line). Needs --encoder-name.")
@click.option("--encoder-name", "encoder_name_given", type=NAME, default=None,
              help="With --embeddings (required there): the name of the encoder that made them (laser2, sonar, "
                   "...), recorded in the store; stores mine together only when their encoder names and "
                   "dimensions match.")
@click.option("--dim", type=click.IntRange(min=1), default=None,
              help="With --embeddings: the dimension of raw .f32/.f16 rows (LASER: 1024; required for them, read "
                   "from the file for the other formats).")
@click.option("--embeddings-column", type=NAME, default=None,
              help="With a Parquet or Hugging Face --embeddings: the column of vectors [default: embedding].")
@input_format_options
@ray_option("the encoding (an actor pool of encoders, one shard at a time each, any input format; choose "
            "--shard-rows so that each actor gets several shards). The store is the same as without --ray, "
            "but for the last bits of vectors whose numbers move with the thread count: docs/scaling.md)")
def embed(corpus, lang, out_dir, encoder_name, projection, part, dtype, batch_size, shard_rows,
          max_chars, overwrite, device, precision, runtime, prompt, prompt_name, quiet, embeddings_file, encoder_name_given, dim,
          embeddings_column,
          ray_address, input_format) -> None:
    """Embed CORPUS into an embedding store: a text file (one sentence per line, UTF-8, plain or
    gz/xz/zst/bz2), JSON Lines (--text-field), Parquet or CSV (--text-column) or a Hugging Face
    dataset; '-' reads standard input (copied to a temporary file first; --input-format says how).

    The store (OUT) holds .npy shards, the line number and text of every sentence, and a
    manifest recording the encoder, projection, input file hash and settings. Empty lines are
    skipped but line numbers refer to the input file. A line repeated within a shard is encoded
    once (every repeat keeps its row). Memory use is bounded by --shard-rows.

    Interrupted (Ctrl-C, crash)? Run the same command again: finished shards are kept and only
    the rest is encoded. A finished store is not rebuilt. If the input file or the settings
    changed, the command refuses unless --overwrite is given.

    \b
    Example:
      xmine embed news.de.txt.gz --lang de -o stores/news.de
    """
    # A finished store is returned as it is, so by default it is asked for at its own precision, runtime
    # and projection: for its own encoder only (was: a me5-small store's "openvino" asked of use-m3,
    # which refused it, and its projection of another encoder, even with --overwrite; hiding that
    # the encoders differ, which the store's writer says).
    # With --overwrite the store is replaced, so its settings are no defaults (was: its projection kept
    # without a word, and a prompt given refused for it)
    finished = None if overwrite else artefact_encoder([out_dir])

    def finished_by(name: str):
        return finished if finished is not None and finished.name == name else None

    if embeddings_file is not None:
        given = [o.replace("--encoder-name", "--encoder") for o in given_on_command_line(
            "encoder_name", "device", "precision", "runtime", "prompt", "prompt_name", "batch_size")]
        if given:  # nothing is encoded: an encoder's options would be read and dropped
            raise ConfigError(f"{', '.join(given)}: {'an option' if len(given) == 1 else 'options'} of encoding, but "
                              "--embeddings FILE stores vectors made "
                              "elsewhere (name their encoder with --encoder-name)")
        encoder = ExternalEmbeddings(embeddings_file, name=encoder_name_given or "", dim=dim, column=embeddings_column)
        encoder_name = encoder.name
        same = finished_by(encoder_name)
    else:
        if encoder_name_given or dim or embeddings_column:
            raise ConfigError("--encoder-name, --dim and --embeddings-column go with --embeddings FILE")
        if not given_on_command_line("encoder_name"):  # as mine, score and build-index read it
            encoder_name = projection_encoder(projection) or encoder_name
        prompt = encoding_prompt(prompt, prompt_name, (projection,), encoder_name)
        same = finished_by(encoder_name)
        # With --ray the actors encode; this process needs only the fingerprint (no model load for me5-small).
        encoder = load_encoder(encoder_name, device=device, runtime=runtime_for_artefact(same, runtime),
                               precision=precision or (same.run_precision if same else "auto"),
                               prefix=prompt, prompt_name=prompt_name, lazy=ray_address is not None)
    choice = choose_projection(projection, encoder_name=encoder_name, encoder_fp=encoder.fingerprint,
                               artefact_projection=artefact_projection([out_dir]) if same else (False, None))

    if lang is not None:
        warn_of_unseen_languages(choice.path, [lang])
    # Standard input and a URL are copied first: a corpus is read twice (checked, then embedded).
    stream = is_stdin(corpus) or is_url(corpus)
    spooled = temporary_directory("input") if stream else contextlib.nullcontext()
    with spooled as directory:
        try:
            store = embed_corpus(
                (spool_stdin(directory) if is_stdin(corpus) else spool_url(corpus, directory)) if stream else corpus,
                out_dir, encoder=encoder, lang=lang,
                projection=choice.path, part=part, dtype=dtype,
                shard_rows=shard_rows, batch_size=batch_size, max_chars=max_chars, overwrite=overwrite,
                show_progress=not quiet, ray=ray_address, input_format=input_format,
            )
        except InputError as e:  # naming `-` or the URL, not the copy
            raise as_given(e) from None
    info = store.build_info
    if info is not None and info.already_done:
        click.echo(f"{out_dir}: already finished ({len(store)} sentences, dim {store.dim}); nothing to do")
        return
    rate = info.encoded / info.seconds if info and info.seconds > 0 else float("nan")
    resumed = f", {info.resumed_rows} resumed from an earlier run" if info and info.resumed_rows else ""
    click.echo(
        f"embedded {len(store)} sentence{'' if len(store) == 1 else 's'} ({info.encoded if info else len(store)} "
        f"in this run{resumed}), "
        f"dim {store.dim}, {store.manifest.dtype}, part {store.part}, "
        + (f"vectors of {encoder.name!r} read from {embeddings_file}" if embeddings_file is not None else
           f"encoder at {encoder.precision} on "
           f"{getattr(encoder, 'engine', None) or getattr(encoder, 'runtime', 'torch')}")
        + f", in {info.seconds:.1f}s "
        f"({rate:.1f} sentences/s) -> {out_dir}"
    )

@click.command("verify")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
def verify(paths) -> None:
    """Check xmine artefacts completely: every file against the sha256 its manifest records.

    PATHS may be embedding stores, indexes, projections, sentence-transformers exports, records of
    `xmine calibrate`, or outputs with their OUT.json summary (mined pairs in any format: OUT of a
    Moses pair, or either of its files, checks both, OUT.de and OUT.en; search hits, langid; naming
    OUT.json checks OUT). Every path is checked: a one-line error for each damaged file found, and
    exit 2; 0 when everything matches.

    Opening an artefact checks small ones (up to 64 MiB) completely, and large ones file by file as
    they are first read; `verify` reads every byte now.
    """
    failed = 0
    for path in paths:
        t0 = time.perf_counter()
        try:
            kind, nbytes, detail = verify_artefact(path)
        except XmineError as e:  # the next paths are checked too (was: none after the first damaged one)
            for line in error_lines(e):  # one a damaged file
                click.secho(line, fg="red", err=True)
            failed += 1
            continue
        click.echo(f"{path}: OK, an xmine {kind_label(kind)} ({detail}; {nbytes / 2**20:,.1f} MiB checked in "
                   f"{time.perf_counter() - t0:.1f}s)")
    if failed:
        sys.exit(2)

@click.group("cache")
def cache() -> None:
    """The per-sentence embedding cache used by benchmarks and training ($XMINE_HOME/embeddings).

    One SQLite file per encoder, bounded by XMINE_CACHE_MAX_MB megabytes of vectors each (default
    4096); past it the least recently used sentences are evicted. Corpus-scale commands (embed,
    mine, build-index, search) never fill it.
    """

@cache.command("info")
def cache_info() -> None:
    """List the cache files: encoder, sentences held, size on disk, and the bound; each file is
    checked (SQLite's quick_check, which reads all of it) and a damaged one said to be (exit 2)."""
    found = [(f, *cache_file_info(f, check=True)) for f in cache_files()]
    click.echo(f"{xmine_home(create=False) / 'embeddings'}: {sum(i is not None for _, i, _ in found)} cache file(s), bound "
               f"{max_cache_mb():.0f} MB of vectors each (XMINE_CACHE_MAX_MB)")
    for f, i, why in found:
        if i is None:
            click.echo(f"  {f.name}: {why} (left alone)")
        else:
            click.echo(f"  {f.name}: {i['encoder']} ({i['dim']}-d), {i['rows']:,} sentences, "
                       f"{i['bytes'] / 2**20:,.1f} MB on disk" + (
                           f"; DAMAGED ({i['damaged']}): `xmine cache clear --encoder {i['encoder']}` removes it"
                           if i["damaged"] else ""))
    damaged = [f for f, i, why in found if (i or {}).get("damaged") or (i is None and "damaged" in why)]
    if damaged:  # (was: exit 0, as for a sound cache)
        raise ArtefactError(f"{damaged[0]}: a damaged cache file" + (f" ({len(damaged) - 1} more listed above)"
                                                                      if len(damaged) > 1 else "")
                            + "; the lines above say how to remove it (it is rebuilt when next needed)")

@cache.command("clear")
@click.option("--encoder", "encoder_name", type=NAME, default=None, help="Only this encoder's cache (default: all).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def cache_clear(encoder_name, yes) -> None:
    """Delete cache files (the embeddings are recomputed when next needed). Only files that are
    provably xmine's cache are deleted; any other .sqlite file there is named and left alone, and
    files of other names are not touched."""
    found = [(f, *cache_file_info(f)) for f in cache_files()]
    for f, i, why in found:
        if i is None:
            click.echo(f"left alone: {f} ({why})", err=True)
    held = sorted({i["encoder"] for _, i, _ in found if i is not None})
    files = [(f, i) for f, i, _ in found if i is not None and encoder_name in (None, i["encoder"])]
    if not files:
        if encoder_name is not None and held:  # a misspelt name must not read as "already clear"
            raise ConfigError(f"--encoder {encoder_name}: no cache of this encoder; the cache holds "
                              f"{', '.join(held)}")
        click.echo("nothing to clear" + (f": no cache of encoder {encoder_name!r}" if encoder_name else ""))
        return
    total = sum(i["bytes"] for _, i in files)
    if not yes:
        if not sys.stdin.isatty():  # no one to answer: refuse before deleting rather than abort mid-way
            raise ConfigError(f"cache clear would delete {len(files)} cache file(s), {total / 2**20:,.1f} MB; "
                              "with no terminal to confirm on, give --yes")
        click.confirm(f"delete {len(files)} cache file(s), {total / 2**20:,.1f} MB?", abort=True)
    for f, _ in files:
        remove_cache_file(f)
    click.echo(f"deleted {len(files)} cache file(s), {total / 2**20:,.1f} MB")

COMMANDS = [encoders, embed, verify, cache]
