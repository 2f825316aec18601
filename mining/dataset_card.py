"""The dataset card (README.md) of a mined Hugging Face dataset folder (`xmine mine --format hf`):
what made it (encoder, projection, threshold and where it came from, what the language filter,
the pre-search cleaning and each pair filter removed, the inputs' names and hashes). A card is
published, the machine it was made on is not: local paths are given by their last part only."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from xmine.langs import bcp47_tag


def dataset_card(summary: dict, *, keys: tuple[str, str], pairs: int, columns: Sequence[str]) -> str:
    """README.md of a mined dataset: what made it (encoder, projection, threshold and where it came
    from, what the filters removed, the inputs' names and hashes). Local paths are given by their
    last part only: a card is published, the machine it was made on is not."""
    enc, thr, prov = (summary.get(part) or {} for part in ("encoder", "threshold", "provenance"))
    proj = summary.get("projection")
    params = prov.get("parameters") or {}
    inputs = params.get("inputs") or []
    local = [p for p in [(proj or {}).get("path"), *(i.get("path") for i in inputs if i)] if p]
    proj = f"{_public(proj.get('path'), local)} (id {proj.get('id')})" if proj else "none (raw embeddings)"
    langs = [k for k in keys if k not in ("src", "tgt")]
    lines = ["---"]
    if langs:  # as BCP 47 tags, as the Hub reads them and TMX writes them (was: the keys, `zho_Hant`)
        lines += ["language:"] + [f"- {tag}" for tag in dict.fromkeys(bcp47_tag(k) for k in langs)]
    lines += ["task_categories:", "- translation", "tags:", "- bitext", "- xmine", "---", "",
              f"# Mined bitext {keys[0]}-{keys[1]}", "",
              f"{pairs} sentence pairs mined by `xmine mine` with margin scoring, best first. Load with "
              "`datasets.load_from_disk(PATH)`.", "", "| what | value |", "|---|---|",
              f"| encoder | {enc.get('name')} (id {enc.get('id')}) |",
              f"| projection | {proj} |",
              f"| space | {summary.get('part')} |",
              f"| margin, threshold | {thr.get('margin')}, {_or_none(thr.get('value'))} "
              f"({_public(thr.get('source'), local)}) |",
              f"| k, retrieval | {params.get('k')}, {params.get('retrieval')} |",
              f"| search | {summary.get('search')} |"]
    lines += _filter_lines(summary)
    for tag, role, inp in zip(("source", "target"), ("src", "tgt"), inputs):
        ident = ", ".join(f"{k} {_public(v, local) if k == 'path' else v}" for k, v in (inp or {}).items()
                          if k in ("path", "format", "sha256", "manifest"))
        side = summary.get(role) or {}  # what was read and searched: the yield is the pairs of these
        counts = ", ".join(f"{side[k]:,} {what}" for k, what in (("sentences", "sentences"), ("unique", "distinct"),
                                                                 ("mined_rows", "searched")) if side.get(k) is not None)
        lines.append(f"| {tag} input | {ident}{'; ' + counts if counts else ''} |")
    lines.append(f"| xmine | {prov.get('xmine_version')}, commit {prov.get('git_commit')} |")
    lines += ["", "Columns: " + ", ".join(f"`{c}`" for c in columns) + ". `src_record`/`tgt_record` are 1-based "
              "lines of a text or JSON Lines input, rows of a Parquet input or dataset; `src_sentence_index`/"
              "`tgt_sentence_index` (inputs split into sentences) the 1-based index of the sentence in that "
              "record.", ""]
    return "\n".join(lines)


def _or_none(value) -> str:
    """A value as a card shows it: "none" for a missing one (not Python's "None")."""
    return "none" if value is None else str(value)


def _filter_lines(summary: dict) -> list[str]:
    """The card's rows on what the language filter, the pre-search cleaning and the pair filters removed."""
    lines = []
    lf = summary.get("lang_filter") or {}
    if lf:
        removed = [f"{role} {summary[role].get('other_language')}" for role in ("src", "tgt")
                   if (summary.get(role) or {}).get("other_language") is not None]
        what = f"on, sentences removed: {', '.join(removed)}" if lf.get("on") else f"off ({lf.get('source')})"
        lines.append(f"| language filter | {what} |")
    removed = (summary.get("pre_search") or {}).get("removed") or {}
    if removed:
        lines.append("| pre-search cleaning, sentences removed | " + "; ".join(
            f"{role}: " + (", ".join(f"{step} {n}" for step, n in counts.items()) or "none")
            for role, counts in removed.items()) + " |")
    filters = summary.get("filters") or {}
    if "removed" in filters:
        removed = ", ".join(f"{rule} {n}" for rule, n in filters["removed"].items()) or "none active"
        lines.append(f"| pair filters | {filters.get('pairs_before')} pairs selected; removed: {removed} |")
    return lines


def _public(text, local_paths: Sequence[str]):
    """`text` with every local path in it replaced by its last part."""
    if not isinstance(text, str):
        return text
    for p in sorted(local_paths, key=len, reverse=True):
        text = text.replace(str(p), Path(p).name)
    return text


__all__ = ["dataset_card"]
