"""`xmine train` and `xmine export-st`: thin click commands over xmine.disentangle (`xmine langid`: langid_cli)."""

from __future__ import annotations

from pathlib import Path

import click

from xmine.options import comma_list
from xmine.disentangle.fmda_trainer import FmdaConfig, train_fmda
from xmine.disentangle.langid_cli import langid_command
from xmine.disentangle.st_export import export_portable
from xmine.disentangle.sample import MIN_VALID_FRACTION, VALID_SPLITS
from xmine.disentangle.trainer import TrainConfig, train
from xmine.encoders import DEFAULT_ENCODER, load_encoder
from xmine.encoders.pool import PoolEncoder
from xmine.encoders.tokens import require_token_states
from xmine.exec.executor import executor_for
from xmine.langs import is_known_lang
from xmine.disentangle.massive import locate
from xmine.options import NAME, SEED, Finite, GivenPath, given_on_command_line, quiet_option, ray_option
from xmine.encoders.options import precision_option, prompt_options
from xmine.encoders.projection import shipped_dir

# methods.METHOD_NAMES, spelled out: importing methods loads torch, and `xmine --help` must not
# (tests/test_disentangle.py checks that the two agree).
_METHODS = ("center", "dream", "meat", "oracle", "seed", "intra", "inter", "fmda")


def _split_langs(value: str | None) -> list[str] | None:
    if not value:
        return None

    codes = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [c for c in codes if not is_known_lang(c)]
    if unknown:
        raise click.BadParameter(f"not known language code(s): {', '.join(unknown)} (use ISO 639-1 or 639-3, "
                                 "optionally with script: de, deu, deu_Latn; with --method fmda, MASSIVE locales: "
                                 "de-DE)", param_hint="--langs")
    return codes


@click.command("train")
@click.option("--method", type=click.Choice(_METHODS), default="seed", show_default=True,
              help="center: subtract per-language means (no training). dream: two MLPs, reconstruction + "
                   "meaning + language losses + language identification (Tiyajamorn+ 2021). meat: "
                   "reconstruction, cross-reconstruction, language loss and an adversarial language "
                   "discriminator (Kuroda+ 2022). oracle: dream or meat plus intra-class clustering and "
                   "inter-class separation (Ki+ 2024; see --base). seed: one MLP, language = input - "
                   "meaning, L_M + L_L + L_C (Fukushima+ 2025). intra / inter: SEED's two loss families alone. "
                   "fmda: template, residual, language and meaning parts from the encoder's TOKEN states, "
                   "reconstruction + contrastive losses; trains on MASSIVE (--pairs = the MASSIVE folder, "
                   "--langs = locales paired with en-US, e.g. de-DE).")
@click.option("--base", type=click.Choice(("dream", "meat")), default=None,
              help="With --method oracle: the method ORACLE's terms are added to. [default: dream]")
@click.option("--pairs", "pairs", type=NAME, multiple=True, required=True, metavar="DIR|SRC:TGT",
              help="Parallel data; repeat for more. With --method fmda: the MASSIVE folder (holding "
                   "<locale>.jsonl, or data/ with them). A directory is searched recursively: files STEM.LANG "
                   "sharing a STEM (deu-eng.deu + deu-eng.eng, newstest2019.de + .en) or LANG.SPLIT sharing "
                   "a SPLIT (FLORES-200 deu_Latn.devtest) are line-aligned (LANG in lower case; a .gz, .xz, .bz2, .zst "
                   "or .zstd suffix after it is read decompressed; of two scripts of a language, the one --langs "
                   "names (zho_Hant), else the usual one: arb_Arab, not arb_Latn; .id is Indonesian where the STEM "
                   "names its pair, as OPUS's X.en-id.id, else sentence ids); with English in a group every "
                   "other language is paired with English, else every two languages. A MASSIVE folder "
                   "(<locale>.jsonl files) gives every locale x en-US from the train split only (never a "
                   "dev or test row). Or two files "
                   "SRC:TGT (languages from their last suffix: a.de:a.en) or LANG=SRC:LANG=TGT.")
@click.option("-o", "--out", "--output", "out_dir", required=True, type=GivenPath(file_okay=False, path_type=Path),
              help="Projection directory to write (config.json, model.safetensors, manifest.json). Its "
                   ".work/ holds the per-epoch checkpoint: rerun the same command to resume an interrupted "
                   "run; a finished one continues with a higher --max-epochs and --overwrite.")
@click.option("--encoder", type=NAME, default="me5-small", show_default=True,
              help="Encoder whose embeddings are disentangled (me5-small, use-m3, or a sentence-transformers "
                   "name/path). The projection only accepts this encoder later.")
@click.option("--langs", default=None, metavar="L1,L2,...", callback=comma_list,
              help="Keep only language pairs whose two languages are both listed (any code form: de, deu, "
                   "deu_Latn; include English, e.g. deu,fra,eng). [default: all found] With --method fmda: "
                   "the MASSIVE locales to pair with en-US (de-DE; several train one model on all pairs).")
@click.option("--max-pairs-per-lang", type=click.IntRange(min=4), default=None,
              help="At most N sentence pairs per language pair, a seeded random sample (embedding is the "
                   "slow part on a CPU: benchmarks/RESULTS.md, 'Encoding speed'). [default: all] With --method fmda: "
                   "train rows of MASSIVE (the same ids for every pair).")
@click.option("--max-valid-pairs", type=click.IntRange(min=8), default=None,
              help="--method fmda only: at most N rows of MASSIVE's dev split for early stopping. [default: all]")
@click.option("--batch-size", type=click.IntRange(min=2), default=512, show_default=True,
              help="Pairs per batch; each batch holds one language pair, and the random same-language "
                   "partners (s', t') the losses need are drawn inside it.")
@click.option("--lr", type=Finite(0, min_open=True), default=1e-4, show_default=True, help="Adam learning rate.")
@click.option("--max-epochs", type=click.IntRange(min=1), default=200, show_default=True,
              help="Upper bound on epochs: training ends by early stopping (--patience) or here (said where "
                   "its last epoch is still its best).")
@click.option("--patience", type=click.IntRange(min=1), default=5, show_default=True,
              help="Stop after this many epochs without a lower validation loss (--method fmda: see "
                   "--fmda-select); the best epoch is kept.")
@click.option("--valid-fraction", type=Finite(MIN_VALID_FRACTION, 1, max_open=True), default=0.1, show_default=True,
              help="Share of each language pair held out for validation (early stopping, langid accuracy); a "
                   "language pair needs at least 2 held out and 2 trained on (at 1e-4, 15,000 pairs).")
@click.option("--valid-split", type=click.Choice(VALID_SPLITS), default="disjoint", show_default=True,
              help="disjoint: no sentence of a held-out pair is trained on (multi-way data such as a FLORES "
                   "folder share each English line between language pairs: a pair holding a held-out sentence is "
                   "held out too); per-pair: each language pair split on its own (the shipped projection's "
                   "recipe; held-out sentences may then be trained on in another language pair).")
@click.option("--layers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Linear layers per MLP (the papers use 1; more adds ReLU between them).")
@click.option("--fmda-contrastive", type=click.Choice(("clamped", "paper")), default="clamped", show_default=True,
              help="--method fmda only: the form of the contrastive terms (Eqs. 3-4). clamped: negative "
                   "cosines clamped at 0, and an in-batch negative besides the BLEU-pool one (as DREAM); "
                   "paper: the equations as printed (unclamped, pool negatives only; measured far worse).")
@click.option("--fmda-select", type=click.Choice(("dev-retrieval", "dev-loss")), default="dev-retrieval",
              show_default=True,
              help="--method fmda only: what keeps the best epoch and early-stops (with --patience). "
                   "dev-retrieval: accuracy@1 of the meaning part retrieving translations among the dev rows "
                   "(both directions, mean); dev-loss: the summed loss on the dev rows.")
@click.option("--fmda-meaning-init", type=click.Choice(("default", "identity")), default="default",
              show_default=True,
              help="--method fmda only: initialise the meaning layer to the identity (needs --layers 1).")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed of sampling, split, initialisation, batch order and negatives: same seed and "
                   "--threads, same weights (another thread count sums in another order: weights ~1e-8 apart).")
@click.option("--restart", is_flag=True, help="Discard a checkpoint left in OUTPUT/.work instead of resuming it.")
@click.option("--overwrite", is_flag=True,
              help="Replace OUTPUT if it is a finished xmine projection already (anything else is refused). "
                   "Its checkpoint is resumed where the settings and data (by content) are this run's, and "
                   "refused where any differ but --max-epochs and --patience; add --restart to train from scratch.")
@click.option("--threads", type=click.IntRange(min=1, max=1024), default=1, show_default=True,  # (2048: torch crashed)
              help="CPU threads for training the (small, d x d) networks; more rarely helps and contends "
                   "with other jobs. Embedding uses the encoder's own setting.")
@precision_option()
@quiet_option(help="No progress bars or per-epoch lines.")
@ray_option("the embedding step (sentences not in the cache yet are encoded by a pool of encoder actors; "
            "training itself stays here)")
def train_command(method, base, pairs, out_dir, encoder, langs, max_pairs_per_lang, max_valid_pairs, batch_size, lr,
                  max_epochs, patience, valid_fraction, valid_split, layers, fmda_contrastive, fmda_select,
                  fmda_meaning_init, seed, restart, overwrite, threads, precision, runtime, prompt, prompt_name, device,
                  quiet, ray_address):
    """Train a meaning/language projection (disentangler) on parallel sentences.

    One multilingual model is trained on all language pairs found. Embeddings come from the
    per-sentence cache, so a second method on the same data encodes nothing again. Prints the
    validation loss each epoch, stops early, keeps the best epoch, checkpoints every epoch.

    \b
    Example:
      xmine train --method seed --pairs ../shared/data/parallel/tatoeba-challenge \\
          --langs deu,fra,rus,cmn,eng --max-pairs-per-lang 2000 -o proj-seed/
      xmine train --method dream --pairs ../shared/data/massive --langs deu,eng -o proj-massive-de/
    """
    if method == "fmda":
        if len(pairs) != 1:
            raise click.UsageError("--method fmda takes one --pairs: the MASSIVE folder")
        partners = _split_langs(langs)
        if not partners:
            raise click.UsageError("--method fmda needs --langs: the MASSIVE locales to pair with en-US (e.g. de-DE)")
        if ray_address is not None:  # FMDA trains on token states, which the encoder actors do not return
            raise click.UsageError("--ray applies to the methods other than fmda")
        ignored = given_on_command_line("base", "valid_fraction", "valid_split")  # (FMDA holds out MASSIVE's dev split)
        if ignored:
            raise click.UsageError(f"{', '.join(ignored)}: not used by --method fmda (it holds out MASSIVE's dev "
                                   "split, --max-valid-pairs rows of it)")
        data, run = locate(pairs[0], option="pass it as --pairs DIR (the data root, massive/ or data/)"), train_fmda
        config = FmdaConfig(partners=partners, batch_size=batch_size, lr=lr, max_epochs=max_epochs, patience=patience,
                            max_train=max_pairs_per_lang, max_dev=max_valid_pairs, layers=layers,
                            contrastive=fmda_contrastive, select=fmda_select, meaning_init=fmda_meaning_init, seed=seed)
    else:
        if (fmda_contrastive, fmda_select, fmda_meaning_init) != ("clamped", "dev-retrieval", "default"):
            raise click.UsageError("--fmda-contrastive, --fmda-select and --fmda-meaning-init apply to "
                                   "--method fmda only")
        if max_valid_pairs is not None:
            raise click.UsageError("--max-valid-pairs applies to --method fmda only (other methods hold out "
                                   "--valid-fraction)")
        unused = given_on_command_line("batch_size", "lr", "max_epochs", "patience", "layers", "threads")
        if method == "center" and unused:  # (was: read, recorded as hyperparameters, and not used)
            raise click.UsageError(f"{', '.join(unused)}: not used by --method center (its model is the "
                                   "languages' mean embeddings, computed once, not trained)")
        data, run = list(pairs), train
        config = TrainConfig(method=method, base=base, layers=layers, batch_size=batch_size, lr=lr,
                             max_epochs=max_epochs, patience=patience, valid_fraction=valid_fraction,
                             valid_split=valid_split,
                             max_pairs_per_lang=max_pairs_per_lang, langs=_split_langs(langs), seed=seed)
    config.check()
    enc = load_encoder(encoder, precision=precision, runtime=runtime, prefix=prompt, prompt_name=prompt_name,
                       device=device, lazy=ray_address is not None)  # Ray actors load it
    if method == "fmda":  # before MASSIVE is read and its negative pools built
        require_token_states(enc)
    if ray_address is not None:  # encoded on the cluster's workers (`xmine.exec.executor`)
        enc = PoolEncoder(enc, executor_for(ray_address))
    cfg = run(data, out_dir, encoder=enc, config=config, restart=restart, show_progress=not quiet, threads=threads,
              overwrite=overwrite).config
    if method == "fmda":
        rows = ", ".join(f"{k} {v}" for k, v in sorted(cfg["term_rows_per_epoch"].items()))
        click.echo(f"wrote {out_dir}: method fmda, pairs {','.join(cfg['language_pairs'])}, kept epoch "
                   f"{cfg['best_epoch']} (best {cfg['selected_on']}): dev loss {cfg['best_valid_loss']:.4f} (untrained "
                   f"{cfg['initial_valid_loss']:.4f}), dev retrieval {cfg['best_dev_retrieval']:.4f} (untrained "
                   f"{cfg['initial_dev_retrieval']:.4f}); rows per term and epoch: {rows}; left out (no annotation): "
                   f"{', '.join(cfg['left_out_terms']) or 'none'}", err=True)
        return
    best = cfg.get("best_valid_loss")
    click.echo(f"wrote {out_dir}: method {cfg['method']}{' on ' + cfg['base'] if cfg.get('base') else ''}, "
               f"languages {','.join(cfg['languages'])}"
               + (f", best valid loss {best:.4f} at epoch {cfg['best_epoch']} (untrained {cfg['initial_valid_loss']:.4f})"
                  if best is not None else "")
               + f", held-out langid accuracy {cfg['langid']['accuracy']:.4f}", err=True)


@click.command("export-st")
@click.argument("projection", metavar="PROJ", type=NAME)
@click.argument("out", type=GivenPath(path_type=Path))
@click.option("--overwrite", is_flag=True, help="Replace OUT if it is an earlier export-st result.")
@prompt_options
def export_st_command(projection, out, overwrite, prompt, prompt_name):
    """Write PROJ (a projection directory, or 'default': the one shipped for me5-small) with its
    encoder as a sentence-transformers model in OUT made of standard modules only (Transformer,
    Pooling, Normalize, Dense, Normalize): SentenceTransformer(OUT) loads it without xmine and
    encodes to the vectors xmine mine compares. The projection's meaning part must be one linear
    layer (the shipped one is). A projection trained with --prompt or --prompt-name is exported with
    that prompt, which becomes the model's default prompt (another one is refused)."""
    path = shipped_dir(DEFAULT_ENCODER) if projection == "default" else Path(projection)
    model = export_portable(path, out, overwrite=overwrite, prompt=prompt, prompt_name=prompt_name)
    click.echo(f"exported {', '.join(type(m).__name__ for m in model)} -> {out}", err=True)


COMMANDS = [train_command, langid_command, export_st_command]
