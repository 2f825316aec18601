"""The corpora whose sentences form a scored bitext's neighbourhoods (`xmine score --src-corpus`,
`--tgt-corpus`), checked before `score` claims its output: a wrong one leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

from xmine.artefacts.directory import open_artefact
from xmine.artefacts.input_artefacts import artefact_kind
from xmine.errors import InputError
from xmine.index.choose import pq_code
from xmine.io.readers import open_corpus
from xmine.mining.langid import DEFAULT_LID, accepts, knows, language_counts
from xmine.store.reader import EmbeddingStore


def check_corpora(paths) -> dict:
    """Refuse a missing corpus, and open each that is an artefact (its reader validates it), before
    the output is claimed: a wrong --src-corpus or --tgt-corpus leaves nothing behind. Returns the
    stores and indexes opened, by path, for loading them without opening them again."""
    opened = {}
    for path in paths:
        if path is None:
            continue
        kind = artefact_kind(path)  # (a missing file, an unfinished artefact: refused here)
        if kind == "text" and Path(path).is_file() and Path(path).stat().st_size == 0:
            # (was: refused after both sides of the bitext were embedded, their work left behind)
            raise InputError(path, "file is empty: a corpus forms the pairs' neighbourhoods, it needs sentences")
        if kind == "embedding-store":
            opened[path] = EmbeddingStore.open(path)
        elif kind == "index":
            opened[path] = ix = open_artefact(path, "index")
            if pq_code(ix.manifest.choice.factory):  # (was: its decoded vectors used, the search called exact)
                raise InputError(path, f"an index of PQ codes ({ix.manifest.choice.factory}), which decode only "
                                       "approximately: margins from them are not those the thresholds were calibrated "
                                       "with; give the embedding store or text it was built from")
    return opened


def check_corpus_languages(corpora, langs, sample: int = 200) -> None:
    """A text corpus whose first `sample` sentences are mostly the other side's language is refused (the
    corpora swapped: every margin against the wrong language); a store's language: `check_artefact_lang`."""
    if None in langs or accepts(*langs) or not all(knows(DEFAULT_LID, lang) for lang in langs):
        return
    for path, own, other, option in zip(corpora, langs, langs[::-1], ("--src-corpus", "--tgt-corpus")):
        if path is not None and artefact_kind(path) == "text":
            texts = [t for _, (_, t) in zip(range(sample), open_corpus(path, check=False).sentences())]
            n_own, n_other = language_counts(texts, (own, other))
            if n_other >= len(texts) / 2 and n_other > 4 * n_own:
                raise InputError(path, f"{option} gives the {own} side's neighbours, but {n_other} of its "
                                       f"first {len(texts)} sentences are {other}: are the corpora swapped?")


__all__ = ["check_corpora", "check_corpus_languages"]
