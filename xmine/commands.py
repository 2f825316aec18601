"""`xmine encoders` and `xmine embed`: list the encoders; turn a text file into an embedding store."""

from __future__ import annotations

import click

from xmine.cluster import ray_option
from xmine.corpus import DEFAULT_MAX_CHARS
from xmine.encoders.options import precision_option


@click.command("encoders")
def encoders() -> None:
    """List the sentence encoders xmine knows and whether they can run on this machine.

    Besides these names, --encoder accepts any sentence-transformers model name or local path.
    """
    from xmine.encoders import list_encoders

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


@click.command("embed")
@click.argument("corpus", type=click.Path(dir_okay=True, path_type=str))
@click.option("--lang", required=True, help="Language code of the corpus (e.g. de), recorded in the store.")
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=str),
              help="Store directory to create (or to resume, or to return at once if already finished).")
@click.option("--encoder", "encoder_name", default="me5-small", show_default=True,
              help="Encoder name (see `xmine encoders`) or any sentence-transformers model name/path.")
@click.option("--projection", type=click.Path(exists=True, file_okay=False, path_type=str), default=None,
              help="A trained projection directory (`xmine train`): store its --part instead of raw embeddings.")
@click.option("--part", type=click.Choice(["meaning", "language"]), default="meaning", show_default=True,
              help="Which part of the projection to store (needs --projection for 'language').")
@click.option("--dtype", type=click.Choice(["float16", "float32"]), default="float16", show_default=True,
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
@click.option("--device", default=None, help="Torch device for the encoder (default: cuda if present, else cpu).")
@precision_option(default_from="the precision of the finished store OUT")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@ray_option("the encoding (an actor pool of encoders, one shard per task; choose --shard-rows so that "
            "each actor gets several shards). The store is the same as without --ray")
def embed(corpus, lang, out_dir, encoder_name, projection, part, dtype, batch_size, shard_rows,
          max_chars, overwrite, device, precision, quiet, ray_address) -> None:
    """Embed CORPUS (one sentence per line, UTF-8, plain or gzip) into an embedding store.

    The store (OUT) holds .npy shards, the line number and text of every sentence, and a
    manifest recording the encoder, projection, input file hash and settings. Empty lines are
    skipped but line numbers refer to the input file. Memory use is bounded by --shard-rows.

    Interrupted (Ctrl-C, crash)? Run the same command again: finished shards are kept and only
    the rest is encoded. A finished store is not rebuilt. If the input file or the settings
    changed, the command refuses unless --overwrite is given.

    \b
    Example:
      xmine embed news.de.txt.gz --lang de -o stores/news.de
    """
    from xmine.encoders import load_encoder
    from xmine.store import embed_corpus
    # A finished store is returned as it is, so by default it is asked for at its own precision.
    encoder = load_encoder(encoder_name, device=device, precision=precision or _store_precision(out_dir) or "auto")
    store = embed_corpus(
        corpus, out_dir, encoder=encoder, lang=lang, projection=projection, part=part, dtype=dtype,
        shard_rows=shard_rows, batch_size=batch_size, max_chars=max_chars, overwrite=overwrite,
        show_progress=not quiet, ray=ray_address,
    )
    info = store.build_info
    if info is not None and info.already_done:
        click.echo(f"{out_dir}: already finished ({len(store)} sentences, dim {store.dim}); nothing to do")
        return
    rate = info.encoded / info.seconds if info and info.seconds > 0 else float("nan")
    resumed = f", {info.resumed_rows} resumed from an earlier run" if info and info.resumed_rows else ""
    click.echo(
        f"embedded {len(store)} sentences ({info.encoded if info else len(store)} encoded now{resumed}), "
        f"dim {store.dim}, {store.manifest['dtype']}, part {store.part}, encoder at {encoder.precision}, in {info.seconds:.1f}s "
        f"({rate:.1f} sentences/s) -> {out_dir}"
    )


def _store_precision(out_dir: str) -> str | None:
    """The encoder precision of the finished store in `out_dir` (None: no finished store there)."""
    import json
    from pathlib import Path

    from xmine.artefacts import MANIFEST
    from xmine.encoders import fingerprint_precision

    try:
        fp = json.loads((Path(out_dir) / MANIFEST).read_text(encoding="utf-8"))["encoder"]
        return fingerprint_precision(fp) if isinstance(fp, dict) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


COMMANDS = [encoders, embed]
