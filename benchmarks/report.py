"""Generate benchmarks/RESULTS.md from the result JSONs in benchmarks/results/.

`xmine bench report [--results DIR] [--out FILE]`. One section per task, one table per result
file (its printed table), with the encoder, projections, parameters, data, commit, date and run
time and the machine (CPU, cores, RAM; a GPU) it records.
Results of other benchmarks (BUCC, speed) are included too: as their own table when their JSON
carries a `table` ({"columns", "rows"}) like ours, else as a key/value table of their numbers.
A JSON file that is no result (unreadable, not an object, a malformed table, or edited since it
was written: its content no longer matches the checksum a result ends with) is left out with a
warning naming it and why, and listed with that reason at the end of the report.

Hand-written analysis (how the numbers compare with the papers, why they differ) lives beside
the JSONs as `results/notes/<task>.md` and is placed under that task's section;
`results/notes/summary.md`, if present, follows the header.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
from pathlib import Path
from typing import Any

from xmine.artefacts.fileio import atomic_write_text, unseal
from xmine.artefacts.output_state import md_header
from xmine.artefacts.verify import RESULT_KINDS, result_table_problem
from xmine.benchmarks.common import machine, results_dir, run_at
from xmine.artefacts.outputs import claim_output
from xmine.errors import DamagedManifestError, InputError

log = logging.getLogger("xmine.benchmarks.report")

TASK_TITLES = {
    "quality": "Disentangler quality: methods x tasks",
    "tatoeba": "Tatoeba retrieval accuracy@1 (%)",
    "massive": "MASSIVE cross-lingual retrieval accuracy@1 (%)",
    "massive_templates": "MASSIVE monolingual template retrieval accuracy@1 (%)",
    "qe": "WMT20 QE: Pearson r / Spearman rho (x100) of cosine vs z_mean",
    "sts": "SemEval-2017 STS: correlation (x100) of cosine vs gold",
    "geometry": "Alignment and uniformity (lower is better for both)",
    "bucc": "BUCC 2018 bitext mining",
    "fmda_table2": "FMDA Table 2: MASSIVE cross-lingual retrieval accuracy@1 (%), per-pair models",
    "fmda_table3": "FMDA Table 3: MASSIVE monolingual template retrieval accuracy@1 (%)",
    "mining": "Bitext mining, BUCC-style sets from FLORES-200 and WMT newstest: F1 (x100)",
    "mining_noisy": "Bitext mining on noisy sets (web-like noise added), with and without the pair filters",
    "langid": "Language identification on FLORES-200 devtest (sentence level)",
    "default_projection": "The shipped default projection against raw, per task",
    "embed_speed": "Encoding speed",
    "mining_speed": "Mining speed",
    "scale": "Corpora larger than memory: peak memory, time, approximate recall",
    "memory_per_row": "Peak memory a mined row costs, per search path (growth from 20k to 200k rows)",
    "threshold_study": "Choosing the mining threshold without gold (a study)",
    "threshold_uncalibrated": "The default threshold of a space without a calibration, estimated from the run",
    "langid_unknown": "Language identification: 'unknown' for unseen languages, declared-language check",
    "lid_thresholds": "Language filter: per-language confidence thresholds (chosen on FLORES-200 lines 0-505)",
    "splitters_flores": "Sentence splitters on paragraphs rebuilt from FLORES-200 devtest: "
                        "exact / F1 / boundary recall (%)",
    "numbers_filter": "The numbers pair filter against its digits alone: translations dropped, near-misses kept",
    "approximate_agreement": "Approximate against exact mining on real embeddings",
    "gpu_check": "GPU paths against their CPU results",
}
PAPER_TASKS = ("quality", "tatoeba", "massive", "massive_templates", "fmda_table2", "fmda_table3", "qe", "sts",
               "geometry", "bucc", "mining", "default_projection")
TASK_ORDER = ("mining", "mining_noisy", "langid", "lid_thresholds", "langid_unknown", "default_projection", "quality", "tatoeba",
              "massive", "massive_templates", "fmda_table2", "fmda_table3", "qe", "sts", "geometry", "bucc",
              "threshold_study", "threshold_uncalibrated", "approximate_agreement", "embed_speed", "mining_speed", "scale", "memory_per_row",
              "gpu_check")


def _cell(v: Any, decimals: int) -> str:
    if v is None or (isinstance(v, float) and v != v):  # (an undefined number is written as null)
        return "n/a"
    if isinstance(v, float):
        return f"{v:.{decimals}f}"
    return str(v).replace("|", "\\|")


def markdown_table(columns: list[str], rows: list[list[Any]], *, per_cell: bool = False) -> str:
    """A Markdown table. Numbers get 1 decimal, or 3 when the whole table's numbers are below 10
    in size (alignment/uniformity); with `per_cell` (key/value tables) each number decides alone."""
    nums = [abs(v) for r in rows for v in r if isinstance(v, float) and v == v]
    table_decimals = 3 if nums and max(nums) < 10 else 1

    def decimals(v: Any) -> int:
        if per_cell:
            return 3 if isinstance(v, float) and abs(v) < 10 else 1
        return table_decimals

    lines = ["| " + " | ".join(_cell(c, 1) for c in columns) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(columns))) + "|"]
    lines += ["| " + " | ".join(_cell(v, decimals(v)) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _quick(name: str, res: dict[str, Any]) -> bool:
    """A --quick smoke run: by its parameters (or, for results that record none, its name)."""
    return ((res.get("provenance") or {}).get("parameters") or {}).get("quick") is True or "-quick" in name


def _machine_of(res: dict[str, Any]) -> dict[str, Any]:
    """What a result records of its machine: `machine` (`xmine.benchmarks.common.machine`), with the
    GPU a GPU check records beside it and the CPU an older speed result records as
    `environment.cpu_model` (a regression pass: both shown without); {} where it records none."""
    m = dict(res["machine"]) if isinstance(res.get("machine"), dict) else {}
    if isinstance(res.get("gpu"), str):
        m.setdefault("gpu", res["gpu"])
    if isinstance(res.get("environment"), dict) and isinstance(res["environment"].get("cpu_model"), str):
        m.setdefault("cpu", res["environment"]["cpu_model"])
    return m


def _machine_text(m: dict[str, Any]) -> str:
    """One machine record (`xmine.benchmarks.common.machine`, a GPU where one ran) as a phrase."""
    parts = [m.get("gpu"), m.get("cpu"), f"{m['cores']} logical cores" if m.get("cores") else None,
             f"{m['ram_gb']} GB RAM" if m.get("ram_gb") else None]
    return ", ".join(str(p) for p in parts if p) or "an unnamed machine"


def _describe(res: dict[str, Any], name: str) -> list[str]:
    """Two lines saying what made a result: encoder, projections, data, commit, date, parameters."""
    prov = res.get("provenance") or {}
    enc = res.get("encoder") or {}
    projs = res.get("projections") or {}
    # the precision and runtime measured (was: only the file's name hinted at them, where given)
    head = f"*{name}*" + (f": encoder `{enc.get('name', '?')}` (dim {enc.get('dim', '?')}, {run_at(enc)})"
                          if enc else "")
    if (prov.get("parameters") or {}).get("quick") is True and "-quick" not in name:
        head += "; **a --quick smoke run**, not comparable with papers"  # (its name does not say so)
    if projs:
        head += "; projections: " + ", ".join(f"`{k}` ({(v or {}).get('method', '?')})" for k, v in projs.items())
    if res.get("data"):
        head += f"; {len(res['data'])} data files"
    if not prov:
        head += "; no commit or date recorded (the lab script wrote none then)"
    else:
        head += f"; commit `{prov.get('git_commit') or 'unknown: not run from a git checkout'}`; {prov.get('date', '?')}"
    if isinstance(res.get("seconds"), (int, float)):
        head += f"; {res['seconds']:.0f} s"
    # each result on the machine it records (was: all under the report's own machine)
    head += f"; on {_machine_text(m)}" if (m := _machine_of(res)) else "; machine not recorded"
    params = []
    for k, v in (prov.get("parameters") or {}).items():
        if k == "task":
            continue
        if isinstance(v, list) and len(v) > 12:
            params.append(f"{k}=[{len(v)} items]")
        else:
            text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            params.append(f"{k}={text if len(text) <= 100 else text[:97] + '...'}")
    return [head] + (["", "Parameters: " + ", ".join(params)] if params else [])


def scalar_rows(obj: dict[str, Any], prefix: str = "", depth: int = 0) -> list[list[Any]]:
    """[key, value] rows of a result without a table: its scalars, nested dicts flattened once."""
    rows: list[list[Any]] = []
    for k, v in obj.items():
        if k in ("provenance", "machine", "data"):
            continue
        if isinstance(v, (int, float, str, bool)) or v is None:
            rows.append([prefix + k, v])
        elif isinstance(v, dict) and depth < 2:
            rows += scalar_rows(v, f"{prefix}{k}.", depth + 1)
    return rows


def _note(folder: Path, name: str) -> str | None:
    path = folder / "notes" / f"{name}.md"
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None


def _read_result(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the result, None), or (None, why the file is no result the report can show)."""
    try:
        res = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        return None, f"cannot be read ({e.strerror})"
    except ValueError as e:  # (invalid UTF-8 too)
        return None, f"not valid JSON ({e})"
    if not isinstance(res, dict):
        return None, f"a JSON {type(res).__name__}, not a result object"
    if res.get("kind") not in RESULT_KINDS:  # (was: any object shown as a result, `{"x": 1}` as "x | 1")
        return None, (f"no xmine result (its kind is {res['kind']!r})" if "kind" in res else
                      "no xmine result (it records no kind)")
    try:
        unseal(res, path)  # (a result written before results recorded a checksum is shown as before)
    except DamagedManifestError:
        return None, ("edited or damaged since xmine wrote it (its content no longer matches the checksum it was "
                      "written with); none of its numbers can be trusted")
    if (why := result_table_problem(res) or _fields_problem(res)) is not None:
        return None, why
    return res, None


#: the fields the report reads besides the table, and the JSON kinds each may be (None: absent or null)
_FIELD_KINDS = {"provenance": (dict,), "encoder": (dict,), "projections": (dict,), "data": (list, dict),
                "extra_tables": (list,)}


def _fields_problem(res: dict[str, Any]) -> str | None:
    """What makes a field the report describes a result by unreadable, or None (was: a traceback,
    `provenance` null or a string, `extra_tables` a number; such a result is left out as bad JSON is)."""
    for name, kinds in _FIELD_KINDS.items():
        if res.get(name) is not None and not isinstance(res[name], kinds):
            return f"its field {name!r} is {type(res[name]).__name__}, not {' or '.join(k.__name__ for k in kinds)}"
    parameters = (res.get("provenance") or {}).get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        return f"its field 'provenance.parameters' is {type(parameters).__name__}, not dict"
    if any(v is not None and not isinstance(v, dict) for v in (res.get("projections") or {}).values()):
        return "its field 'projections' holds a value that is no object"
    return None


def read_results(folder: Path) -> tuple[dict[str, list[tuple[str, dict]]], list[str]]:
    """The results in `folder` by task, and each JSON file that is no result with the reason (left
    out with a warning)."""
    by_task: dict[str, list[tuple[str, dict]]] = {}
    other: list[str] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        res, why = _read_result(path)
        if res is None:
            log.warning("%s: %s; left out of the report", path, why)
            other.append(f"`{path.name}`: {why}")
            continue
        if res.get("kind") == "threshold-study":  # a study: its note says what it measured
            by_task.setdefault("threshold_study", [])
            continue
        table = res.get("table")
        if not (isinstance(table, dict) and "columns" in table and "rows" in table):
            # speed benchmarks and the like: show their numbers as a key/value table
            res = dict(res, table={"columns": ["measure", "value"], "rows": scalar_rows(res)},
                       task=res.get("task", path.stem.replace("-quick", "")))
        by_task.setdefault(str(res.get("task", path.stem.split("-")[0])), []).append((path.name, res))
    return by_task, other


def build_report(folder: Path, shown: str, found: tuple[dict[str, list[tuple[str, dict]]], list[str]]) -> str:
    """The Markdown text of RESULTS.md from `found`, what `read_results(folder)` read (`shown`: the
    folder as the report names it). Each JSON file that is no result is listed at the end with the reason."""
    by_task, other = found
    m = machine()
    lines = [
        md_header(REPORT_KIND),  # how `--overwrite` knows the file for an earlier report
        "# xmine benchmark results",
        "",
        f"Generated {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} by "
        f"`xmine bench report` from the JSON files in `{shown}/` "
        "(each one written by `xmine bench <task>` with full provenance).",
        "",
        f"Each result names the machine it was measured on; this report was generated on {_machine_text(m)}, "
        f"{m['os']}.",
        "",
        "Every row is a variant of the embeddings: `raw` is the encoder output; `<projection>:meaning` "
        "and `<projection>:language` are a projection's two parts. `-quick` files are smoke runs "
        "on a small fixed subset, not comparable with papers.",
        "",
    ]
    summary = _note(folder, "summary")
    if summary:
        lines += [summary, ""]
    for task in [t for t in TASK_ORDER if t in by_task] + sorted(t for t in by_task if t not in TASK_ORDER):
        lines += [f"## {TASK_TITLES.get(task, task)}", ""]
        for name, res in sorted(by_task[task], key=lambda nr: (_quick(*nr), nr[0])):
            table = res["table"]
            per_cell = table["columns"] == ["measure", "value"]
            lines += _describe(res, name) + ["", markdown_table(table["columns"], table["rows"], per_cell=per_cell), ""]
            for extra in res.get("extra_tables") or ():
                if isinstance(extra, dict) and "columns" in extra and "rows" in extra:
                    lines += [f"{extra.get('title', '')}:", "", markdown_table(extra["columns"], extra["rows"]), ""]
        note = _note(folder, task)
        if note:
            lines += [note, ""]
        elif task in PAPER_TASKS:
            lines += ["Comparison with the papers: not written yet "
                      f"(`{shown}/notes/{task}.md`).", ""]
    if other:
        lines += ["## Files left out (no result)", ""] + [f"- {n}" for n in other] + [""]
    return "\n".join(lines)


#: What marks a markdown file as an xmine report (its title line; xmine.artefacts.outputs, form "md").
REPORT_KIND = "benchmark-report"


def write_report(results: str | Path | None = None, out: str | Path | None = None, *,
                 overwrite: bool = False) -> Path:
    """Write RESULTS.md atomically (default benchmarks/RESULTS.md) and return its path.

    An existing file is replaced only when it is an earlier report and `overwrite` is given.
    """
    out_path = Path(out) if out else results_dir().parent / "RESULTS.md"
    folder = Path(results) if results else results_dir()
    found = read_results(folder)
    if not found[0]:  # (was: a report saying "No results yet" inside it, and exit 0: a mistyped folder unseen)
        n = len(found[1])
        left = f" ({n} JSON file{'s' * (n > 1)}, none a result: {found[1][0]})" if n else " (no JSON file)"
        raise InputError(folder, f"no xmine benchmark result in it{left}; `xmine bench <task>` writes them. "
                         "Nothing to report; nothing written")
    shown = str(folder) if results else "benchmarks/results"  # (no checkout path in the shipped report)
    with claim_output(out_path, kind=REPORT_KIND, form="md", overwrite=overwrite):
        atomic_write_text(out_path, build_report(folder, shown, found))
    return out_path
