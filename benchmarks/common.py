"""What every benchmark shares: embedding variants (raw / meaning / language), metrics, results.

A benchmark is measured for several *variants* of one encoder's embeddings in one run: the raw
encoder output, and for each projection its meaning part and its language part. Raw embeddings
come from `xmine.encoders.embed_cache.cached_encode`, so text is encoded once across runs, tasks and
projections; a projection is applied on top (cheap, never cached). The evaluation functions of
each task take a single `embed_fn(sentences) -> (n, dim) float32 L2-normalised` so other code
(the methods x tasks table) can call them with any embedding function.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import platform
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from xmine.artefacts.directory import file_fingerprint, provenance
from xmine.io.corpus import decode_line, truncate_for_encoding
from xmine.encoders.embed_cache import cached_encode
from xmine.artefacts.fileio import atomic_write_manifest, load_manifest
from xmine.artefacts.verify import RESULT_DAMAGED_ADVICE, RESULT_KINDS
from xmine.errors import ArtefactError, ConfigError, InputError
from xmine.mining.select import margin_score
from xmine.paths import REPO_ROOT, resolve_data_dir
from xmine.encoders.projection import DEFAULT, NONE, choose_projection, open_projection

#: The `kind` of a benchmark result JSON (what marks it as one xmine may replace with --overwrite).
RESULT_KIND = "xmine-benchmark-result"

#: an embedding function: sentences -> (n, dim) float32, rows L2-normalised, input order
EmbedFn = Callable[[Sequence[str]], np.ndarray]


# ------------------------------------------------------------------------------ Embedding variants


class RawEmbedder:
    """Raw encoder embeddings through the shared sqlite cache, memoised for this process.

    The in-process memo (keyed by the exact list of sentences) saves the sqlite round trip when
    several variants of one run ask for the same sentences.
    """

    def __init__(self, encoder, *, show_progress: bool = True):
        self.encoder = encoder
        self.show_progress = show_progress
        self._memo: dict[str, np.ndarray] = {}

    def __call__(self, sentences: Sequence[str]) -> np.ndarray:
        key = hashlib.sha1("\x00".join(sentences).encode("utf-8")).hexdigest()
        if key not in self._memo:
            # The same truncation as every other xmine command, so cache entries are shared.
            self._memo[key] = cached_encode(self.encoder, truncate_for_encoding(sentences),
                                            show_progress=self.show_progress)
        return self._memo[key]


@dataclasses.dataclass(frozen=True)
class Variant:
    """One row of a benchmark table: a way of embedding sentences."""

    #: row label, e.g. "raw", "seed:meaning", "seed:language"
    name: str
    #: "raw", "meaning" or "language"
    part: str
    #: the function producing the embeddings
    embed: EmbedFn
    #: the projection's fingerprint (None for raw)
    projection: dict | None = None


def projected(raw: EmbedFn, projection, part: str) -> EmbedFn:
    """`raw` followed by `projection.transform(., part)`."""
    return lambda sentences: np.asarray(projection.transform(raw(sentences), part=part), dtype=np.float32)


def _token_level(encoder, projection, part: str) -> EmbedFn:
    return lambda sentences: projection.embed_texts(encoder, sentences, (part,))[part]


def projection_labels(paths: Sequence[str | Path]) -> list[str]:
    """Short unique row labels: each projection's folder name, with as many parent folders as it
    takes to tell it apart from the others ("mixed/seed", "qe6/seed", "oracle")."""
    parts = [Path(p).resolve().parts for p in paths]
    labels = []
    for i, own in enumerate(parts):
        k = 1
        while k < len(own) and any(o[-k:] == own[-k:] for j, o in enumerate(parts) if j != i and o != own):
            k += 1
        labels.append("/".join(own[-k:]) or "proj")
    # the same folder given twice (or one called "raw"): number the repeats
    seen: dict[str, int] = {"raw": 1}
    for i, label in enumerate(labels):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            labels[i] = f"{label}#{seen[label]}"
    return labels


def make_variants(
    encoder, projection_paths: Iterable[str | Path] = (), *, parts: Sequence[str] = ("meaning", "language"),
    show_progress: bool = True, add_default: bool = False,
) -> list[Variant]:
    """Raw, then for each projection the requested parts; checks each projection's encoder.

    A projection is a directory, `default` (the projection shipped for this encoder, row label
    "default") or `none` (nothing: raw is always the first row). `add_default`: put the default
    first when it applies to this encoder and no projection was named at all.
    """
    raw = RawEmbedder(encoder, show_progress=show_progress)
    variants = [Variant("raw", "raw", raw)]
    specs = [str(p) for p in projection_paths]
    if add_default and not specs:
        # the shipped projection's row whenever one applies to this encoder, default or not yet:
        # these benchmarks are how it earns being the default
        try:
            choose_projection(DEFAULT, encoder_name=encoder.name, encoder_fp=encoder.fingerprint())
            specs = [DEFAULT]
        except ConfigError:
            specs = []
    # (fixed row label or "", folder) of each named projection
    named = [("default" if spec.lower() == DEFAULT else "",
              choose_projection(spec, encoder_name=encoder.name, encoder_fp=encoder.fingerprint()).path)
             for spec in specs if spec.lower() != NONE]
    for (fixed, path), label in zip(named, projection_labels([p for _, p in named])):
        proj = open_projection(path)  # (any kind: an FMDA projection's parts come from the token path)
        proj.check_encoder(encoder.fingerprint())
        for part in parts:
            # FMDA reads token states: its parts come from the texts, through the encoder's token path
            embed = _token_level(encoder, proj, part) if proj.token_level else projected(raw, proj, part)
            variants.append(Variant(f"{fixed or label}:{part}", part, embed, proj.fingerprint()))
    return variants


# ----------------------------------------------------------------------------------------- Metrics


def l2_normalise(x: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Rows of x scaled to unit length, as `dtype` (a zero row stays zero)."""
    x = np.asarray(x, dtype=dtype)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def cosine_matrix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Cosine similarities of every row of x with every row of y (rows need not be normalised)."""
    return l2_normalise(x) @ l2_normalise(y).T


def paired_cosine(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """cos(x_i, y_i) for each row i."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    num = (x * y).sum(1)
    return num / np.maximum(np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1), 1e-12)


def margin_matrix(sims: np.ndarray, k: int = 4) -> np.ndarray:
    """xSIM-style ratio margin of a similarity matrix (rows: queries x, columns: candidates y).

    score(x, y) = cos(x, y) / ((mean of x's k best cos to Y + mean of y's k best cos to X) / 2),
    the Artetxe & Schwenk (2019) ratio margin, computed with xmine's mining formula.
    """
    sims = np.asarray(sims, dtype=np.float32)
    kx = min(k, sims.shape[1])
    ky = min(k, sims.shape[0])
    # the k best of each row / column (np.partition: linear time, order inside the k irrelevant)
    mean_x = np.partition(sims, sims.shape[1] - kx, axis=1)[:, -kx:].mean(1)
    mean_y = np.partition(sims, sims.shape[0] - ky, axis=0)[-ky:, :].mean(0)
    return np.asarray(margin_score(sims, mean_x[:, None], mean_y[None, :], kind="ratio"))


def retrieval_accuracy(scores: np.ndarray, gold: np.ndarray | None = None, *,
                       texts: Sequence[str] | None = None) -> float:
    """Accuracy@1 (%) of nearest-neighbour retrieval: row i's best column must be gold[i].

    `gold` defaults to i (line-aligned test sets). Ties go to the lowest column index, as
    argmax does, so a constant score matrix is only right for row 0. With `texts` (one per
    column), a best column whose text equals the gold column's text counts as a hit too.
    """
    scores = np.asarray(scores)
    if scores.shape[0] == 0:
        return float("nan")
    pred = scores.argmax(axis=1)
    gold = np.arange(scores.shape[0]) if gold is None else np.asarray(gold)
    if texts is None:
        return float(100.0 * np.mean(pred == gold))
    if len(texts) != scores.shape[1]:
        raise ValueError(f"{len(texts)} texts for {scores.shape[1]} columns")
    index: dict[str, int] = {}
    text_id = np.asarray([index.setdefault(t, len(index)) for t in texts])
    return float(100.0 * np.mean(text_id[pred] == text_id[gold]))


def retrieval_scores(
    x: np.ndarray, y: np.ndarray, *, margin: bool, x_texts: Sequence[str] | None = None,
    y_texts: Sequence[str] | None = None,
) -> dict[str, float]:
    """Accuracy@1 (%) x->y ("fwd") and y->x ("bwd") for line-aligned embeddings (row i <-> row i).

    With `margin`, also with xSIM-style ratio-margin scores ("fwd_margin", "bwd_margin"). With the
    texts of both sides, a retrieval also counts as a hit when the retrieved line's text equals the
    gold line's text (two identical candidates cannot be told apart by any embedding), and the
    exact-line numbers are reported beside as "*_strict".
    """
    sims = cosine_matrix(x, y)
    scored = {"": sims}
    if margin:
        scored["_margin"] = margin_matrix(sims)
    out: dict[str, float] = {}
    for suffix, s in scored.items():
        out["fwd" + suffix] = retrieval_accuracy(s, texts=y_texts)
        out["bwd" + suffix] = retrieval_accuracy(s.T, texts=x_texts)
        if x_texts is not None and y_texts is not None:
            out["fwd" + suffix + "_strict"] = retrieval_accuracy(s)
            out["bwd" + suffix + "_strict"] = retrieval_accuracy(s.T)
    return out


def correlations(pred: Sequence[float], gold: Sequence[float]) -> dict[str, float]:
    """Pearson and Spearman correlation, x100."""
    from scipy.stats import pearsonr, spearmanr

    pred = np.asarray(pred, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.float64)
    return {"pearson": float(100 * pearsonr(pred, gold)[0]), "spearman": float(100 * spearmanr(pred, gold)[0])}


def mean_of(values: Iterable[float]) -> float:
    vals = [v for v in values if v is not None and not np.isnan(v)]
    return float(np.mean(vals)) if vals else float("nan")


# --------------------------------------------------- Results: table printing, JSON with provenance


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, digits: int = 1) -> str:
    """A plain-text table (numbers rounded to `digits`)."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "n/a" if np.isnan(v) else f"{v:.{digits}f}"
        return str(v)

    body = [[cell(v) for v in r] for r in rows]
    widths = [max(len(str(c)), *(len(r[i]) for r in body)) if body else len(str(c)) for i, c in enumerate(columns)]
    line = lambda vals: "  ".join(  # noqa: E731
        v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(vals, widths))
    )
    out = [line([str(c) for c in columns]), line(["-" * w for w in widths])]
    out += [line(r) for r in body]
    return "\n".join(out)


def safe_name(name: str) -> str:
    """A file-name-safe version of an encoder name or path."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name if "/" in name else name).strip("_") or "encoder"


def results_dir() -> Path:
    """benchmarks/results in the source checkout (./benchmarks/results outside one)."""
    root = REPO_ROOT / "benchmarks" if (REPO_ROOT / "pyproject.toml").is_file() else Path.cwd() / "benchmarks"
    return root / "results"


def run_at(encoder: dict) -> str:
    """How an encoder record (a fingerprint) ran: "bf16 on openvino"; one without them is fp32 on torch."""
    return f"{encoder.get('precision', 'fp32')} on {encoder.get('runtime', 'torch')}"


def default_out(task: str, encoder_name: str, *, quick: bool = False, precision: str = "fp32",
                runtime: str = "torch") -> Path:
    """benchmarks/results/<task>-<encoder>[-<precision>][-<runtime>][-quick].json; fp32 on torch keeps the
    plain name."""
    tag = ("" if precision == "fp32" else f"-{precision}") + ("" if runtime == "torch" else f"-{runtime}")
    return results_dir() / f"{task}-{safe_name(encoder_name)}{tag}{'-quick' if quick else ''}.json"


def data_fingerprints(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    return [file_fingerprint(p) for p in sorted({str(p) for p in paths})]


def machine() -> dict[str, Any]:
    """CPU model, logical cores and RAM of this machine (Linux /proc when present)."""
    cpu = platform.processor() or platform.machine()
    ram_gb = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram_gb = round(int(line.split()[1]) / 1024**2, 1)
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gb": ram_gb, "os": platform.platform()}


def write_result(out: str | Path, *, task: str, encoder, variants: Sequence[Variant], data_files: Iterable[str | Path],
                 parameters: dict[str, Any], columns: Sequence[str], rows: Sequence[Sequence[Any]],
                 details: dict[str, Any], seconds: float,
                 extra_tables: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Write a benchmark result JSON atomically (with full provenance, ending with the checksum of
    its own content that `read_result`, `xmine verify` and `xmine bench report` check) and return it.

    `extra_tables`: further tables ({"title", "columns", "rows"}) that `xmine bench report` shows
    under the main one (e.g. MASSIVE per locale).
    """
    result = {
        "kind": RESULT_KIND,
        "format_version": 1,
        "task": task,
        "encoder": encoder.fingerprint(),
        "projections": {v.name.split(":")[0]: v.projection for v in variants if v.projection is not None},
        "data": data_fingerprints(data_files),
        "machine": machine(),
        "seconds": round(seconds, 2),
        "table": {"columns": list(columns), "rows": [list(r) for r in rows]},
        "extra_tables": [dict(t) for t in extra_tables or ()],
        "details": details,
        "provenance": provenance(task=task, encoder=encoder.name, **parameters),
    }
    result = _null_for_undefined(result)
    atomic_write_manifest(out, result)  # ends with the checksum of its own content, as manifests do
    return result


def _null_for_undefined(value: Any) -> Any:
    """`value` with every NaN or infinite number (an undefined correlation of a constant track) as
    None: JSON has no NaN, and strict readers (jq, JSON.parse) refuse Python's bare `NaN`."""
    if isinstance(value, dict):
        return {k: _null_for_undefined(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_null_for_undefined(v) for v in value]
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        return None
    return value


def read_result(path: str | Path) -> dict[str, Any]:
    """The result JSON at `path` (any kind `xmine verify` knows as a result), checked before
    anything in it is used: ArtefactError (one line naming the file) when it is missing, not valid
    JSON, no result, or edited or damaged since it was written (its content no longer matches the
    checksum it ends with). A result without that checksum, written before results recorded one,
    is read as before. What the lab chains from one result into the next (a calibration into the
    shipped records, a study into its report) is read through here, never with a bare json.loads."""
    path = Path(path)
    if not path.is_file():
        raise ArtefactError(f"{path}: no such result file; run the benchmark that writes it first")
    result = load_manifest(path, what="result", advice=RESULT_DAMAGED_ADVICE)
    if result.get("kind") not in RESULT_KINDS:
        raise ArtefactError(f"{path}: records kind {str(result.get('kind'))[:80]!r}, not that of a result xmine writes")
    return result


def read_lines(path: Path, *, what: str = "data") -> list[str]:
    """Every line of a UTF-8 file, keeping empty ones (line i of one file = line i of another)."""
    if not path.is_file():
        raise InputError(path, f"missing {what} file")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:  # said of its line, as every reader says it (was: a byte offset in the file)
        start, end = raw.rfind(b"\n", 0, e.start) + 1, raw.find(b"\n", e.start)
        decode_line(raw[start: end if end >= 0 else None], path, raw.count(b"\n", 0, e.start) + 1)
        raise
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


#: FLORES-200 devtest under a data root: one `<code>.devtest` file per language (deu_Latn, ...), the
#: same 1,012 sentences in every language, line for line
FLORES_DEVTEST = Path("parallel", "flores200", "devtest")


def flores_lines(folder: Path, code: str, *, rows: int | None = None) -> list[str]:
    """The first `rows` (None: all) lines of language `code`'s FLORES-200 devtest file in `folder`
    (a data root's FLORES_DEVTEST), empty lines kept so line i is the same sentence in every file."""
    path = Path(folder) / f"{code}.devtest"
    if not path.is_file():
        have = " ".join(sorted(p.stem for p in Path(folder).glob("*.devtest"))[:12])
        raise InputError(path, f"missing FLORES-200 file for {code!r} (codes look like: {have} ...)")
    return read_lines(path, what="FLORES-200 devtest")[:rows or None]


def data_locator(needs: str, how_to_get: str) -> Callable[[str | Path | None], Path]:
    """`locate(data_dir)` of a data set: its folder (`needs`) under the data root, DataNotFoundError
    saying how to get it when missing (`xmine.paths.resolve_data_dir`)."""
    return lambda data_dir: resolve_data_dir(data_dir, needs=needs, how_to_get=how_to_get)


def parse_list(value: str | None) -> list[str] | None:
    """'a,b , c' -> ['a', 'b', 'c']; None/'' -> None."""
    if not value:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise ConfigError(f"empty list: {value!r}")
    return items
