"""Approximate against exact mining on real embeddings: pairs kept by both, only exact, only approximate.

Each family is a mining task made from real parallel text (only part of each side has its
translation on the other side, as in mining): its two sides are written into the `--work` folder
as text files, embedded with `xmine embed` (the default encoder, runtime and projection; a
finished store is reused), then mined with `xmine mine` at the defaults (the projection's
calibrated threshold, k = 4): exact; approximate with the former defaults (`--pq-m 32 --nprobe 8
--no-refine`); `--approximate --no-refine` (today's search alone); and `--approximate` (with the
refinement of mining/approximate.py). Each command runs in a fresh process, timed, its peak RSS read
from /proc (`scale.run_measured`); pairs are compared by line numbers.

Target: approximate mining keeps >= 98% of exact's pairs and adds <= 2% (of exact's count) that
exact does not keep.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import click

NEWSTEST = "parallel/wmt-newstest"
TATOEBA = "parallel/tatoeba-challenge/deu-eng/deu-eng"

#: family -> (what, {side: [(file under the data folder, first line, last line or None)]}).
#: news: German of newstest 2008-2013, English of 2011-2013 (translations of 9,006 of the German
#: lines) and of the de-en sets 2014-2016 (translations of German lines not mined).
#: tat: Tatoeba-Challenge deu-eng lines 1-12,000 against English lines 6,001-15,962.
#: news-fr: French of newstest 2008-2013 against news's English side (a family's name in place of
#: the parts: that family's store of the side is reused).
FAMILIES = {
    "news": ("WMT newstest de-en (news, long sentences)", {
        "de": [(f"{NEWSTEST}/{y}/newstest{y}.de", 1, None) for y in range(2008, 2014)],
        "en": [(f"{NEWSTEST}/{y}/newstest{y}.en", 1, None) for y in range(2011, 2014)]
        + [(f"{NEWSTEST}/{y}/de-en/newstest{y}.en", 1, None) for y in range(2014, 2017)]}),
    "tat": ("Tatoeba-Challenge deu-eng (short everyday sentences)", {
        "de": [(f"{TATOEBA}.deu", 1, 12_000)], "en": [(f"{TATOEBA}.eng", 6_001, None)]}),
    "news-fr": ("WMT newstest fr-en (news, another language)", {
        "fr": [(f"{NEWSTEST}/{y}/newstest{y}.fr", 1, None) for y in range(2008, 2014)], "en": "news"}),
}
#: the runs: exact; the approximate search as it was before the refinement, with 32 PQ
#: sub-quantisers and 8 lists (the old defaults at these sizes, where nlist / 64 < 8); today's
#: defaults without the refinement; today's defaults.
RUNS = {"exact": [], "approximate --pq-m 32 --nprobe 8 --no-refine": ["--approximate", "--pq-m", "32", "--nprobe", "8",
                                                                       "--no-refine"],
        "approximate --no-refine": ["--approximate", "--no-refine"], "approximate": ["--approximate"]}


def write_side(data: Path, parts, out: Path) -> list[dict]:
    """Concatenate the line ranges `parts` of files under `data` into `out` (unless it holds them)."""
    from xmine.artefacts.fileio import atomic_write_text
    from xmine.benchmarks.common import data_fingerprints, read_lines

    lines = []
    for rel, first, last in parts:
        lines += read_lines(data / rel)[first - 1: last]
    text = "".join(f"{t}\n" for t in lines)
    if not out.is_file() or out.read_text(encoding="utf-8") != text:
        atomic_write_text(out, text)
    return data_fingerprints([data / rel for rel, _, _ in parts])


def mined_pairs(tsv: Path) -> set[tuple[int, int]]:
    """(src line, tgt line) of every pair of a `--line-numbers` mining output."""
    with open(tsv, encoding="utf-8") as f:
        return {(int(r[3]), int(r[4])) for r in (line.rstrip("\n").split("\t") for line in f)}


def agreement(exact: set, approx: set) -> dict:
    both = len(exact & approx)
    return {"pairs": len(approx), "both": both, "only_exact": len(exact) - both, "only_approximate": len(approx) - both,
            "kept": both / max(1, len(exact)), "added": (len(approx) - both) / max(1, len(exact))}


def run_family(name: str, data: Path, work: Path, extra: list[str]) -> dict:
    from scale import _xmine, run_measured
    from xmine.artefacts.fileio import load_manifest

    what, sides = FAMILIES[name]
    files, stores = [], {}
    for lang, parts in sides.items():
        owner = name
        if isinstance(parts, str):  # another family's side: its text and store
            owner, parts = parts, FAMILIES[parts][1][lang]
        text = work / f"{owner}.{lang}"
        files += write_side(data, parts, text)
        stores[lang] = work / f"store-{owner}.{lang}"
        embed = run_measured(_xmine("embed", text, "--lang", lang, "-o", stores[lang], "-q"))
        print(f"{name}.{lang}: {embed['seconds']} s to embed (0 if the store was finished)", flush=True)
    src, tgt = (stores[lang] for lang in sides)
    result = {"family": what, "data_files": files, "runs": {}}
    exact = None
    for run, flags in RUNS.items():
        out = work / f"{name}-{'-'.join(w.strip('-') for w in run.split())}.tsv"
        cmd = _xmine("mine", src, tgt, "-o", out, "--line-numbers", "--overwrite", "-q",
                     *flags, *(extra if flags and "--nprobe" not in flags else []))
        r = run_measured(cmd)
        summary = load_manifest(Path(f"{out}.json"), what="summary")
        pairs = mined_pairs(out)
        r.pop("stdout")
        r.update(threshold=summary["threshold"]["value"], src_rows=summary["src"]["mined_rows"],
                 tgt_rows=summary["tgt"]["mined_rows"], approximate=summary["provenance"]["parameters"]["approximate"])
        if exact is None:
            exact, r["pairs"] = pairs, len(pairs)
        else:
            r.update(agreement(exact, pairs))
        result["runs"][run] = r
        print(name, run, json.dumps({k: v for k, v in r.items() if k not in ("command", "approximate")}), flush=True)
    return result


def _table(families: dict) -> dict:
    rows = []
    for name, res in families.items():
        ex = res["runs"]["exact"]
        for run, r in res["runs"].items():
            rows.append([name, f"{ex['src_rows']:,} x {ex['tgt_rows']:,}", run, r["pairs"],
                         "" if run == "exact" else f"{100 * r['kept']:.1f}",
                         "" if run == "exact" else f"{100 * r['added']:.1f}", r["seconds"], r["peak_rss_mb"]])
    return {"columns": ["family", "rows (unique)", "search", "pairs", "kept of exact's (%)", "added (% of exact's)",
                        "seconds", "peak RSS (MB)"], "rows": rows}


@click.command("approximate-agreement")
@click.option("--work", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder for the text files, stores and outputs.")
@click.option("--families", default=",".join(FAMILIES), show_default=True, help="Comma-separated families.")
@click.option("--data-dir", default=None, help="The shared data folder (default: $XMINE_DATA or ../shared/data).")
@click.option("--nlist", type=int, default=None, help="Passed to the approximate runs (default: theirs).")
@click.option("--nprobe", type=int, default=None, help="Passed to the approximate runs (default: theirs).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Result JSON (default: benchmarks/results/approximate_agreement.json).")
def command(**kw) -> None:
    """Approximate against exact mining on real embeddings: pairs kept by both, only one."""
    from xmine.artefacts.directory import provenance
    from measure import write_speed_result
    from xmine.benchmarks.common import machine, results_dir
    from xmine.benchmarks.mining import locate

    args = SimpleNamespace(**kw)
    args.out = args.out or results_dir() / "approximate_agreement.json"
    data = locate(args.data_dir)
    args.work.mkdir(parents=True, exist_ok=True)
    extra = (["--nlist", str(args.nlist)] if args.nlist else []) + (["--nprobe", str(args.nprobe)] if args.nprobe else [])
    families = {name: run_family(name, data, args.work, extra) for name in args.families.split(",")}
    write_speed_result(args.out, {"task": "approximate_agreement", "families": families, "machine": machine(),
                                  "provenance": provenance(benchmark="approximate_agreement", families=args.families,
                                                           nlist=args.nlist, nprobe=args.nprobe),
                                  "table": _table(families)}, benchmark="approximate_agreement")
    print(f"wrote {args.out}")

