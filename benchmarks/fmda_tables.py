"""FMDA's Tables 2 and 3 on MASSIVE: cross-lingual and monolingual template retrieval.

- Table 2 (`fmda_table2`): for each trained language pair (en-US, X) and both directions, every
  source test utterance retrieves its translation among all 2,974 target test utterances by
  cosine; accuracy@1 (%). Rows: raw (the encoder's sentence vector), DREAM's meaning part, FMDA's
  meaning, template (TP) and residual (RS) parts; each column uses the models trained on that
  column's pair, as the paper does. `acc_text` in the details also counts a hit when the
  retrieved utterance's text equals the gold one (MASSIVE's test split repeats some utterances).
- Table 3 (`fmda_table3`): monolingual template retrieval on pairs generated from test
  utterances by slot replacement (`massive_templates`, seeded), for every locale with annotated
  test rows: en-US with each pair's models (the paper's ENEN_DE, ENEN_ES, ENEN_JA) and X itself
  when annotated (de-DE).

Token states of the test sentences come from one token store per sentence list (cached on disk),
so the models of three pairs and the raw vectors share one encoding pass.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import numpy as np

from xmine.benchmarks import common
from xmine.benchmarks.common import l2_normalise
from xmine.benchmarks.massive_templates import build_template_pairs
from xmine.disentangle import load_projection
from xmine.langs import normalize_lang
from xmine.disentangle.fmda_data import read_massive
from xmine.encoders.tokens import build_token_store, share_sentence_vectors
from xmine.errors import ConfigError
from xmine.artefacts.outputs import claim_output

PIVOT = "en-US"


def fmda_parts_from_store(projection, store, *, batch_rows: int = 256) -> dict[str, np.ndarray]:
    """The four FMDA parts (L2-normalised) of every sentence of a token store."""
    import torch
    import torch.nn.functional as F

    from xmine.disentangle.model import FMDA_PARTS, pad_batch

    n = len(store)
    out = {p: np.empty((n, projection.dim), np.float32) for p in FMDA_PARTS}
    order = np.argsort(store.lengths(), kind="stable")  # similar lengths together: little padding
    with torch.no_grad():
        for s in range(0, n, batch_rows):
            rows = order[s:s + batch_rows]
            h, mask = pad_batch([store.token_states(int(r)) for r in rows])
            res = projection.model(h, mask)
            for p in FMDA_PARTS:
                out[p][rows] = F.normalize(res[p], dim=-1, eps=1e-12).numpy()
    return out


def _acc(x: np.ndarray, y: np.ndarray, y_text: list[str]) -> dict[str, float]:
    best = (x @ y.T).argmax(1)
    gold = np.arange(len(x))
    t = np.asarray(y_text, dtype=object)
    return {"acc": float(100 * np.mean(best == gold)), "acc_text": float(100 * np.mean(t[best] == t[gold])),
            "rows": int(len(x))}


def evaluate(encoder, folder: str | Path, models: dict[str, dict[str, Any]], *, seed: int = 0,
             max_rows: int | None = None, show_progress: bool = True) -> dict[str, Any]:
    """Both tables. `models`: {partner locale: {"fmda": Projection, "dream": Projection}}."""
    folder = Path(folder)
    partners = list(models)
    for p, m in models.items():
        for kind in ("fmda", "dream"):
            if kind not in m:
                raise ConfigError(f"no --{kind} projection given for {p}")
            m[kind].check_encoder(encoder.fingerprint())
        for kind in ("fmda", "dream"):  # (was: --dream of any method, its row labelled "DREAM meaning")
            if m[kind].method != kind:
                raise ConfigError(f"--{kind} {p}: {m[kind].path} is a projection of method {m[kind].method}, "
                                  f"not {kind}")
    locales = [PIVOT] + partners
    rows = {loc: read_massive(folder, loc) for loc in locales}
    test = {loc: [r for r in rows[loc] if r.partition == "test"][:max_rows] for loc in locales}
    for loc in partners:
        if [r.id for r in test[loc]] != [r.id for r in test[PIVOT]]:
            raise ConfigError(f"{folder / (loc + '.jsonl')}: test rows not aligned with {PIVOT}")
    stores = {loc: build_token_store(encoder, [r.utt for r in test[loc]], show_progress=show_progress,
                                     desc=f"test token states {loc}") for loc in locales}
    for loc in locales:  # so `bench massive` and other pooled-vector runs reuse them
        share_sentence_vectors(encoder, [r.utt for r in test[loc]], stores[loc])
    raw = {loc: l2_normalise(stores[loc].pooled) for loc in locales}
    labels = ["raw", "DREAM meaning", "FMDA meaning", "FMDA template (TP)", "FMDA residual (RS)"]
    test_parts: dict[tuple[str, str], dict[str, np.ndarray]] = {}

    def variants(loc: str, partner: str, store=None, raw_vecs=None) -> dict[str, np.ndarray]:
        """Every row's embedding of the test split of `loc` (or of `store`) under `partner`'s models."""
        if store is None:
            if (loc, partner) not in test_parts:
                test_parts[(loc, partner)] = variants(loc, partner, stores[loc], raw[loc])
            return test_parts[(loc, partner)]
        f = fmda_parts_from_store(models[partner]["fmda"], store)
        return {"raw": raw_vecs, "DREAM meaning": models[partner]["dream"].transform(raw_vecs, "meaning"),
                "FMDA meaning": f["meaning"], "FMDA template (TP)": f["template"], "FMDA residual (RS)": f["residual"]}

    # Table 2
    t2_cols, t2_cells = [], {}
    for p in partners:
        for src, tgt in ((PIVOT, p), (p, PIVOT)):
            col = f"{src.split('-')[0].upper()}-{tgt.split('-')[0].upper()}"
            t2_cols.append(col)
            vs, vt = variants(src, p), variants(tgt, p)
            texts = [r.utt for r in test[tgt]]
            for lab in labels:
                t2_cells[(lab, col)] = _acc(vs[lab], vt[lab], texts)
    # Table 3: sources are test utterances (their rows of the test store); targets get a store of their own
    t3_cols, t3_cells, pair_info = [], {}, {}
    for loc in locales:
        if not any(r.annot_utt is not None for r in test[loc]):
            continue
        made = build_template_pairs(folder, loc, seed=seed)  # seeded (benchmarks.massive_templates)
        made = made.head(max_rows) if max_rows is not None else made
        pairs = [{"id": p.id, "source": p.source, "target": p.target} for p in made.pairs]
        pair_info[loc] = made.summary | {"examples": pairs[:3]}
        row_of = {}
        for i, r in enumerate(test[loc]):
            row_of.setdefault(r.utt, i)
        pairs = [q for q in pairs if q["source"] in row_of]  # all of them, unless --quick cut the test rows
        src_rows = np.asarray([row_of[q["source"]] for q in pairs])
        tgt_texts = [q["target"] for q in pairs]
        tgt_store = build_token_store(encoder, tgt_texts, show_progress=show_progress, desc=f"template targets {loc}")
        rt = l2_normalise(tgt_store.pooled)
        for p in (partners if loc == PIVOT else [loc]):
            col = f"{loc.split('-')[0].upper()} (EN-{p.split('-')[0].upper()} models)"
            t3_cols.append(col)
            vs, vt = variants(loc, p), variants(loc, p, tgt_store, rt)
            for lab in labels:
                t3_cells[(lab, col)] = _acc(vs[lab][src_rows], vt[lab], tgt_texts)
    table = lambda cols, cells: {"columns": ["embedding"] + cols,  # noqa: E731
                                 "rows": [[lab] + [cells[(lab, c)]["acc"] for c in cols] for lab in labels]}
    flat = lambda cells: {f"{lab} | {c}": v for (lab, c), v in cells.items()}  # noqa: E731
    return {"table2": table(t2_cols, t2_cells), "table3": table(t3_cols, t3_cells),
            "table2_cells": flat(t2_cells), "table3_cells": flat(t3_cells),
            "template_pairs": pair_info, "files": [str(folder / f"{loc}.jsonl") for loc in locales],
            "test_rows": len(test[PIVOT])}


def run(encoder, folder, fmda_dirs: dict[str, str], dream_dirs: dict[str, str], *, out_dir: Path, seed: int = 0,
        quick: bool = False, overwrite: bool = False, command: str = "", tag: str = "",
        show_progress: bool = True) -> list[Path]:
    """Evaluate and write fmda_table2 / fmda_table3 result JSONs; returns their paths. `tag`: what the
    names carry after the encoder's for a variant of the default run (`runner.variant_tag`).

    Both JSONs are claimed (`xmine.artefacts.outputs.claim_output`) before any work: never an input or a
    foreign file, an earlier result replaced only with `overwrite`.
    """
    started = time.time()
    if set(fmda_dirs) != set(dream_dirs):
        raise ConfigError(f"give --fmda and --dream for the same locales (got {sorted(fmda_dirs)} and {sorted(dream_dirs)})")
    tasks = ("fmda_table2", "fmda_table3")
    outs = {t: Path(out_dir) / common.default_out(t, encoder.name + tag, quick=quick).name for t in tasks}
    inputs = [folder, *fmda_dirs.values(), *dream_dirs.values()]
    with contextlib.ExitStack() as claims:
        for t in tasks:
            claims.enter_context(claim_output(outs[t], kind=common.RESULT_KIND, form="json", overwrite=overwrite,
                                              inputs=inputs))
        models = {p: {"fmda": load_projection(fmda_dirs[p]), "dream": load_projection(dream_dirs[p])} for p in fmda_dirs}
        for loc, pair in models.items():  # each pair with the models trained on it (was: any model taken)
            for kind, projection in pair.items():
                if normalize_lang(loc) not in {normalize_lang(lang) for lang in projection.languages}:
                    raise ConfigError(f"--{kind} {loc}={projection.path}: trained on "
                                      f"{', '.join(projection.languages)}, not on {loc}")
        res = evaluate(encoder, folder, models, seed=seed, max_rows=300 if quick else None, show_progress=show_progress)
        variants = [common.Variant(f"{kind}-{p}", kind, None, m[kind].fingerprint() | {"path": str(m[kind].path)})
                    for p, m in models.items() for kind in ("fmda", "dream")]
        for task in tasks:
            table, cells = res[task.replace("fmda_", "")], res[task.replace("fmda_", "") + "_cells"]
            details = {"cells": cells, "test_rows": res["test_rows"], "command": command,
                       "projections": {p: {k: str(m[k].path) for k in m} for p, m in models.items()},
                       "training": {p: {k: _training_summary(m[k]) for k in m} for p, m in models.items()}}
            if task == "fmda_table3":
                details["template_pairs"] = res["template_pairs"]
            print(f"\n{task}\n" + common.format_table(table["columns"], table["rows"]))
            common.write_result(outs[task], task=task, encoder=encoder, variants=variants, data_files=res["files"],
                                parameters={"seed": seed, "quick": quick, "command": command},
                                columns=table["columns"], rows=table["rows"], details=details,
                                seconds=time.time() - started)
    return list(outs.values())


def _training_summary(projection) -> dict[str, Any]:
    """What a projection was trained on and how long (for the result JSON)."""
    cfg = projection.config
    out = {k: cfg.get(k) for k in ("method", "best_epoch", "best_valid_loss", "hyperparameters", "language_pairs")}
    out["epochs"] = len(cfg.get("history") or [])
    out |= {k: cfg[k] for k in ("trained_terms", "left_out_terms", "term_rows_per_epoch") if k in cfg}
    data = cfg.get("training_data") or {}
    out["training_rows"] = {k: data.get(k) for k in ("train_rows", "dev_rows", "counts") if k in data}
    return out
