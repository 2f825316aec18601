"""`xmine langid`: the language of each line of text files, by a projection's language part or a
language identification library, or (--eval) the accuracy on labelled files. Files are read a
block of lines at a time (`LANGID_BLOCK`), so memory does not grow with a file."""

from __future__ import annotations

import contextlib
import shutil
import sys
from itertools import islice
from pathlib import Path

import click

from xmine.artefacts.directory import file_fingerprint, provenance
from xmine.artefacts.fileio import missing
from xmine.artefacts.outputs import claim_output
from xmine.encoders import DEFAULT_ENCODER, load_encoder
from xmine.encoders.embed_cache import cached_encode
from xmine.encoders.options import encodes_nothing, precision_option
from xmine.encoders.projection import resolve_projection, shipped_dir
from xmine.errors import ConfigError, InputError
from xmine.io.corpus import CorpusStats, iter_corpus, truncate_for_encoding
from xmine.io.reader_base import format_by_path
from xmine.langs import NOT_LANGUAGE_SUFFIXES, is_known_lang, normalize_lang
from xmine.mining.langid import (LID_BACKENDS, UNKNOWN, TrustRule, accepts, backend_model, identify_by_projection,
                                 supported_languages, trust_table)
from xmine.mining.langid import identify as identify_by_library
from xmine.options import NAME, GivenPath, given_on_command_line, quiet_option, refuse_overwrite_without_output
from xmine.tempdirs import temporary_directory

#: lines identified at a time (their embeddings: LANGID_BLOCK x the encoder's dimension, float32)
LANGID_BLOCK = 10_000


def _truth(spec: str) -> tuple[Path, str]:
    """The file of an --eval FILE and its language: LANG=FILE's, else the last suffix of the file's
    name that is a language, past a compression's and a file type's (`NOT_LANGUAGE_SUFFIXES`:
    tatoeba.deu-eng.deu, test.de.txt, data.de.gz, news.de.sgm -> deu), else its name before the
    first dot (deu_Latn.devtest, deu_Latn.txt). A name that holds no language (corpus.txt), or a
    LANG that is none, is refused (was: scored as language 'txt' or 'gz', which a projection never
    saw, exit 0)."""
    path, lang = _labelled(spec)
    if lang:
        if not is_known_lang(lang):
            raise click.BadParameter(f"{spec!r}: {lang!r} is no language code (LANG=FILE: de, deu or deu_Latn)",
                                     param_hint="FILES")
        return path, normalize_lang(lang)
    stem, *suffixes = path.name.split(".")
    for code in (*reversed(suffixes), stem):
        if code and is_known_lang(code) and code.lower() not in NOT_LANGUAGE_SUFFIXES:
            return path, normalize_lang(code)
    raise click.BadParameter(f"{path}: cannot tell its language from its name (name it STEM.LANG, as news.de, or "
                             f"give LANG={path})", param_hint="FILES")


def _labelled(spec: str) -> tuple[Path, str | None]:
    """(file, language) of LANG=FILE, or (file, None) for a file named as it is."""
    lang, eq, file = spec.partition("=")
    if eq and not Path(spec).exists():
        if not lang.strip() or not file:  # (was: `=FILE` scored under the language of FILE's name)
            raise click.BadParameter(f"{spec!r}: {'no language before' if file else 'no file after'} '=' (LANG=FILE)",
                                     param_hint="FILES")
        return Path(file), lang
    return Path(spec), None


@click.command("langid")
@click.option("--projection", "projection_dir", type=NAME, default=None, metavar="default|DIR",
              help="Projection directory from `xmine train`, or 'default' (the one shipped for the encoder); its "
                   "language part and stored centroids identify the language.")
@click.option("--lid", default=None, type=click.Choice(LID_BACKENDS), is_eager=True, callback=encodes_nothing,
              help="Identify with a library instead of a projection (xmine.mining.langid; the one "
                   "`xmine mine --lang-filter` and the language pair filter use). Give --projection or --lid.")
@click.option("--encoder", type=NAME, default=None,
              help="Encoder name; must be the projection's. [default: the one the projection was trained on]")
@click.option("--eval", "evaluate", is_flag=True,
              help="The files are labelled: report accuracy per file and overall instead of per-line output. "
                   "The true language is given as LANG=FILE, else the file's last suffix that is a language, past "
                   "a compression's and a file type's (tatoeba.deu-eng.deu, test.de.txt.gz -> deu), else its name "
                   "before the first dot (deu_Latn.devtest); a file whose name holds none is refused. A line "
                   "called 'unknown' counts as a miss (with --guess, the nearest language is scored); for a "
                   "language the projection never saw, a line is right when called 'unknown'. A library's (--lid) "
                   "answer is right where the language filter accepts it for the file's language (a language it "
                   "cannot tell from a close one: sqi for Tosk Albanian's als).")
@click.option("-o", "--out", "--output", "output", type=GivenPath(dir_okay=False, path_type=Path), default=None,
              help="Write `file<TAB>line<TAB>lang<TAB>score` (with --eval: the report) here instead of stdout "
                   "(atomically, with a summary in OUTPUT.json that marks it as xmine's).")
@click.option("--overwrite", is_flag=True, help="Replace OUTPUT if it is an earlier xmine langid result.")
@click.option("--guess", is_flag=True,
              help="With --projection: print the nearest training language for every line, even where it is "
                   "not trusted (instead of 'unknown').")
@quiet_option(help="No progress bar (each file is read with one).")
@precision_option()
@click.argument("files", nargs=-1, required=True, type=NAME)
def langid_command(projection_dir, lid, encoder, evaluate, output, overwrite, guess, quiet, precision, runtime, prompt,
                   prompt_name, device, files):
    """Identify the language of each line of FILES (one sentence a line).

    With --projection: the nearest language centroid of the projection's language part, among the
    languages it was trained on; 'unknown' where that language is not a trusted label: one whose
    own held-out lines were identified less than 85% of the time at training time (or on fewer
    than 50 lines), since lines of languages the projection never saw fall onto exactly those
    labels (xmine.mining.langid.TrustRule). The score is the cosine to the nearest centroid; it
    does not tell unseen languages from seen ones. With --lid: a language identification library
    and its confidence. Either way a line without a letter (digits, signs) is 'unknown'. With
    --eval: the accuracy, and the share of lines called unknown.
    benchmarks/RESULTS.md compares both on FLORES-200.
    """
    if (projection_dir is None) == (lid is None):
        raise click.UsageError("give exactly one of --projection DIR and --lid BACKEND")
    refuse_overwrite_without_output(overwrite, output)
    # (was: a file named '-' written, then read back as standard input's lines)
    if str(output) == "-":
        raise click.BadParameter("'-': langid writes standard output when -o is left out", param_hint="-o")
    if any(str(_labelled(spec)[0]) == "-" for spec in files):
        raise click.BadParameter("'-': langid reads files, not standard input; save it to a file first",
                                 param_hint="FILES")
    for path in (_labelled(spec)[0] for spec in files):  # (was: JSON Lines labelled as their JSON source, exit 0)
        if path.is_file() and (fmt := format_by_path(path, default="text", not_dataset="")) != "text":
            raise InputError(path, f"a {fmt} file by its name; langid reads text, one sentence a line: write the "
                                   "text field's values to a file first")
    if projection_dir == "default":  # (was: "Directory 'default' does not exist", where every other command takes it)
        projection_dir = shipped_dir(encoder or DEFAULT_ENCODER)
        if projection_dir is None:
            raise click.BadParameter(f"xmine ships no projection for encoder {encoder!r}", param_hint="--projection")
    elif projection_dir is not None and not Path(projection_dir).is_dir():
        why = missing(projection_dir) or "not a directory"  # (a link that loops said to be one)
        raise click.BadParameter(f"{projection_dir}: {why} (a projection from `xmine train`, or 'default')",
                                 param_hint="--projection")
    if lid is not None and (unused := given_on_command_line("guess", "encoder", "precision", "runtime", "prompt",
                                                            "prompt_name", "device")):  # (was: read and dropped)
        raise click.UsageError(f"{', '.join(unused)}: {'an option' if len(unused) == 1 else 'options'} of "
                               "--projection, not of --lid")
    claiming = (claim_output(output, kind="langid-result", form="tsv", overwrite=overwrite,
                             inputs=[projection_dir] + [_labelled(spec)[0] for spec in files])
                if output is not None else contextlib.nullcontext())
    with claiming as claim:
        if lid is not None:
            known, projection = sorted(supported_languages(lid)), None
        else:
            projection = resolve_projection(projection_dir)  # (one of sentence vectors: refused before encoding)
            known = projection.languages
            enc = load_encoder(encoder or projection.config["encoder"]["name"], precision=precision, runtime=runtime,
                               prefix=prompt, prompt_name=prompt_name, device=device)
            projection.check_encoder(enc.fingerprint())
        if evaluate:  # every file's language first: refused before anything is encoded
            scored: dict[Path, str] = {}
            for spec in files:
                path, truth = _truth(spec)
                # (was: a file given twice counted twice in the overall accuracy, or scored under two languages)
                if (first := scored.get(path.resolve())) is not None:
                    raise click.BadParameter(f"{path} is given twice ({first} and {spec}); --eval scores each file "
                                             "once, under one language", param_hint="FILES")
                scored[path.resolve()] = spec
                # A language the projection never saw is scored by the lines called unknown (what its trust
                # rule is for); a library's, or --guess, always answers a language it knows.
                if truth not in known and (lid is not None or guess):
                    raise ConfigError(f"{path}: language {truth!r} is not one the {'library' if lid else 'projection'} "
                                      f"knows ({', '.join(known)}), so --eval cannot score it"
                                      + (" with --guess (without it, a line is right when called unknown)"
                                         if guess else "") + "; without --eval, the answers for its lines are shown")
        line_counts, read = [], []
        for spec in files:  # every file read once first: a bad line fails before a line is written
            stats = CorpusStats(path=_labelled(spec)[0])
            # (its warnings said once, here; a library reads a long line whole: was "cut for encoding")
            for _ in iter_corpus(stats.path, stats=stats, **({"max_chars": sys.maxsize} if lid else {})):
                pass
            line_counts.append(stats.lines)
            if claim is not None:  # (only a result file records them, with what was skipped or cut: was neither)
                read.append({"given": spec, **file_fingerprint(stats.path), "empty_lines_skipped": stats.empty_lines,
                             **({} if lid else {"lines_cut_for_encoding": stats.long_count})})

        def identify(texts: list[str]) -> tuple[list[str], list[float], list[str]]:
            """(labels, scores, answers: what the command shows and --eval scores) of a block."""
            if lid is not None:  # as a projection's: a line without a letter, or one the library declines, names
                # no language (was: "12345" and emoji called English, a declined one an empty label)
                codes, confidences = identify_by_library(texts, lid)
                labels = [c if c and any(ch.isalpha() for ch in t) else UNKNOWN for c, t in zip(codes, texts)]
                return labels, [p if c != UNKNOWN else 0.0 for c, p in zip(labels, confidences.tolist())], labels
            emb = cached_encode(enc, truncate_for_encoding(texts), show_progress=False)
            labels, scores, nearest = identify_by_projection(projection, emb, texts)
            return labels, list(scores), list(nearest if guess else labels)

        from tqdm.auto import tqdm

        report: list[str] = []
        total_ok = total_n = unknown = 0
        with contextlib.ExitStack() as stack:
            # Standard output's answers are written to a file first and copied out once all are known:
            # nothing is printed for a run that fails on a later file, and no line meets a progress bar.
            tmp = (stack.enter_context(claim.atomic_file()) if claim is not None
                   else Path(stack.enter_context(temporary_directory("langid"))) / "langid.tsv")
            out = stack.enter_context(open(tmp, "w", encoding="utf-8"))
            for spec, lines in zip(files, line_counts):
                path, lang = (_truth(spec) if evaluate else _labelled(spec))
                file_ok = file_n = file_unknown = 0
                with tqdm(total=lines, desc=path.name, unit="line", disable=quiet, dynamic_ncols=True) as bar:
                    # a block at a time: memory is bounded by LANGID_BLOCK, not by the file
                    sentences = iter_corpus(path, warn=False)
                    while block := list(islice(sentences, LANGID_BLOCK)):
                        numbers, texts = zip(*block)
                        labels, scores, shown = identify(list(texts))
                        file_unknown += shown.count(UNKNOWN)  # (shown: was the labels, so --guess's report
                        # gave the untrusted share as 'unknown' while OUTPUT.json said 0)
                        file_n += len(shown)
                        if evaluate:
                            # (a library's, as the language filter judges it: was exact, so FLORES als_Latn, which
                            # every detector labels sqi, scored 0%)
                            file_ok += sum(accepts(lang, p) if lid is not None and p != UNKNOWN else
                                           p == (lang if lang in known else UNKNOWN) for p in shown)
                        else:
                            out.write("".join(f"{path}\t{n}\t{p}\t{s:.4f}\n" for n, p, s in zip(numbers, shown, scores)))
                        bar.update(numbers[-1] - bar.n)
                    bar.update(lines - bar.n)
                total_n += file_n
                total_ok += file_ok
                unknown += file_unknown
                if evaluate:
                    report.append(f"{path}\t{lang}{'' if lang in known else ' (unseen: right when unknown)'}\t"
                                  f"accuracy {file_ok / file_n:.4f}\t({file_ok}/{file_n})\t"
                                  f"unknown {file_unknown / file_n:.4f}")
            if evaluate:
                report.append(f"overall\taccuracy {total_ok / max(total_n, 1):.4f}\t({total_ok}/{total_n})\t"
                              f"unknown {unknown / max(total_n, 1):.4f}")
                out.write("".join(line + "\n" for line in report))
            out.close()
            if claim is None:
                sys.stderr.flush()  # (the last bar's line end, before the first answer)
                with open(tmp, encoding="utf-8") as answers:
                    shutil.copyfileobj(answers, sys.stdout)
        if claim is not None:
            # what made it (was: the files' names as given, no version, encoder or model)
            claim.finish({"projection": projection.fingerprint() if lid is None else None, "lid": lid,
                          "encoder": enc.fingerprint() if lid is None else None,
                          "lid_model": backend_model(lid) if lid is not None else None,
                          "inputs": read, "evaluation": evaluate, "guess": guess,
                          "lines": total_n, "unknown": unknown,
                          **({"accuracy": total_ok / max(total_n, 1)} if evaluate else {}),
                          "unknown_rule": vars(TrustRule()) if lid is None else None,
                          "provenance": provenance(projection=None if projection_dir is None else str(projection_dir),
                                                   lid=lid, encoder=encoder, precision=precision, runtime=runtime,
                                                   prompt=prompt, prompt_name=prompt_name, guess=guess,
                                                   evaluation=evaluate)})
            # the one-line summary every command ends with (was: none, with -o)
            click.echo(f"{'scored' if evaluate else 'identified'} {total_n:,} line(s) of {len(files)} file(s)"
                       + (f", accuracy {total_ok / max(total_n, 1):.4f}" if evaluate else "") + f" -> {claim.path}")
        if unknown and not evaluate and not guess:
            click.echo(f"xmine: {unknown} of {total_n} line(s) 'unknown' ({_unknown_reason(lid, projection)})", err=True)


def _unknown_reason(lid: str | None, projection) -> str:
    """Why lines were called 'unknown': by a library, no letter or no answer; by a projection, an
    unseen or untrusted language, or (was: unsaid) a projection that trusts none of its languages."""
    if lid is not None:
        return "no letter in the line, or the library gave no answer"
    table = trust_table(projection.config, projection.languages)
    if any(row["trusted"] for row in table.values()):
        return ("a language the projection was not trained on, or nearest to one it does not identify reliably, or "
                "no letter in the line; --guess prints the nearest")
    whys = "; ".join(f"{lang}: {row['why']}" for lang, row in list(table.items())[:3])
    return (f"the projection identifies none of its languages reliably ({whys}{'; ...' if len(table) > 3 else ''}), "
            "so every line is; --guess prints the nearest")
