"""An encoder whose `encode` runs on an executor's pool of workers (the embedding step of
`xmine train --ray`).

`PoolEncoder(encoder, executor)` has the wrapped encoder's name, dimension and fingerprint; each
call to `encode` cuts the sentences into one slice per worker, runs them as units of the pool
(`xmine.exec.executor`: on Ray, one actor per GPU, else one per `threads` CPUs, restarted and its
slice re-run when killed) and gathers the vectors in input order. The workers load the encoder
once, at the start, and keep it for every call. So code that takes an encoder (the embedding
cache, the trainer) runs its encoding on the cluster unchanged. For whole corpora, `xmine embed
--ray` streams shards through the same kind of pool (`xmine.store.writer`).
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Sequence

import numpy as np

from xmine.encoders.base import Encoder, sentence_list
from xmine.encoders.loader import load_encoder
from xmine.exec.executor import Executor, Recipe

log = logging.getLogger(__name__)

#: Fewer sentences than this per worker are not worth a round trip: they go to fewer workers.
MIN_SLICE = 256


def model_actors(encoder: Encoder, executor: Executor, threads: int) -> tuple[int, bool]:
    """(actors, on GPUs) of a pool running `encoder` on `executor`: on GPUs where the cluster has
    them and the encoder's model can use one; use-m3 (numpy) and an OpenVINO build (its CPU plugin)
    run on CPUs (was: given GPU actors, where use-m3 ran on their CPUs and recorded cuda, and an
    OpenVINO encoder could not load)."""
    on_cpus_only = encoder.name == "use-m3" or getattr(encoder, "runtime", "torch") == "openvino"
    gpus = executor.gpus() if on_cpus_only else None
    if gpus:  # (GPUs left idle: said, with the way to use them where there is one)
        log.warning(f"the cluster has {gpus} GPU(s), but {encoder.name} runs on CPUs here ("
                    + ("numpy" if encoder.name == "use-m3" else "its OpenVINO build, chosen for this machine's CPU; "
                       "--runtime torch runs it on the GPUs") + "): its actors use the cluster's CPUs")
    return executor.model_actors(threads, gpu=not on_cpus_only)


def run_device(encoder: Encoder, executor: Executor, *, use_gpu: bool) -> str | None:
    """Where `executor`'s workers run `encoder`: in this process, its own device (None for vectors
    read from a file); on Ray, the one `worker_encoder` loads it on, whatever this process was told."""
    return getattr(encoder, "device", "cpu") if executor.name == "local" else "cuda" if use_gpu else "cpu"


def worker_encoder(encoder: Encoder, *, use_gpu: bool, threads: int) -> Recipe:
    """How a step's worker gets the driver's `encoder` (a `Recipe`): loaded by name at its
    precision, runtime and prompt, on a GPU or `threads` CPUs, and refused unless its fingerprint is
    the driver's (a store or a training run is made by one encoder); in the driver's process, itself."""
    load = functools.partial(load_encoder, encoder.name, device="cuda" if use_gpu else "cpu",
                             threads=None if use_gpu else threads, check=False, same_as=encoder.fingerprint(),
                             precision=getattr(encoder, "precision", "fp32"),
                             runtime=getattr(encoder, "runtime", "torch"), prefix=getattr(encoder, "prefix", None))
    return Recipe(load, made=encoder)


def _slice_encoder(encoder: Recipe):
    """A worker's unit function: (slice number, its vectors) of one slice of sentences."""
    encoder = encoder.get()
    return lambda part, sentences, batch_size, on_rows=None: (part, encoder.encode(sentences, batch_size=batch_size))


class PoolEncoder(Encoder):
    """`encoder`'s `encode` on `executor`'s workers (same name, dimension and fingerprint)."""

    def __init__(self, encoder: Encoder, executor: Executor, *, threads: int = 1):
        self._local = encoder
        self.name, self.dim = encoder.name, encoder.dim
        self.precision = getattr(encoder, "precision", "fp32")
        self.runtime = getattr(encoder, "runtime", "torch")
        self.engine = getattr(encoder, "engine", None)
        self.workers, use_gpu = model_actors(encoder, executor, threads)
        self.device = run_device(encoder, executor, use_gpu=use_gpu)
        worker = worker_encoder(encoder, use_gpu=use_gpu, threads=threads)
        self._pool = executor.actor_pool(_slice_encoder, {"encoder": worker}, actors=self.workers,
                                         cpus=0 if use_gpu else threads, gpus=int(use_gpu))

    def fingerprint(self) -> dict[str, Any]:
        return self._local.fingerprint()

    def encode(self, sentences: Sequence[str], *, batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        sentences = sentence_list(sentences)
        if not sentences:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = max(1, min(self.workers, len(sentences) // MIN_SLICE))
        bounds = np.linspace(0, len(sentences), parts + 1).astype(int)
        units = ((p, sentences[lo:hi], batch_size) for p, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])))
        got = dict(self._pool.map(units))
        return np.concatenate([np.asarray(got[p], dtype=np.float32) for p in range(parts)], axis=0)

    def close(self) -> None:
        self._pool.close()
