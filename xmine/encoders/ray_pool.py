"""An encoder whose `encode` runs in a pool of Ray actors (the embedding step of `xmine train --ray`).

`RayPoolEncoder(encoder)` has the wrapped encoder's name, dimension and fingerprint; each call to
`encode` cuts the sentences into one slice per actor and gathers the vectors in input order. The
actors (one per GPU, else one per `threads` CPUs, `max_restarts=-1` so a killed one comes back and
its call is retried) each load the encoder once, at the start, and keep it for every call. So
code that takes an encoder (the embedding cache, the trainer) runs its encoding on the cluster
unchanged. For whole corpora, `xmine embed --ray` streams shards through an actor pool (`xmine.executor`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from xmine.cluster import get, require_ray
from xmine.encoders.base import Encoder
from xmine.encoders.loader import load_encoder
from xmine.executor import OnRay, PoolActor

#: Fewer sentences than this per actor are not worth a round trip: they go to fewer actors.
MIN_SLICE = 256


def _encode_on_worker(*, use_gpu: bool, threads: int, fingerprint: dict, **kwargs):
    """What each actor holds (`xmine.executor.PoolActor`): the driver's encoder, loaded there."""
    encoder = load_encoder(device="cuda" if use_gpu else "cpu", threads=None if use_gpu else threads, check=False,
                           same_as=fingerprint, **kwargs)
    return lambda sentences, batch_size: encoder.encode(sentences, batch_size=batch_size)


class RayPoolEncoder(Encoder):
    """`encoder`'s `encode` on the connected Ray cluster (same name, dimension and fingerprint)."""

    def __init__(self, encoder: Encoder, *, threads: int = 1):
        ray = require_ray()
        self._local = encoder
        self.name, self.dim = encoder.name, encoder.dim
        count, use_gpu = OnRay().model_actors(threads)
        actor = ray.remote(num_cpus=0 if use_gpu else threads, num_gpus=1 if use_gpu else 0,
                           max_restarts=-1, max_task_retries=-1)(PoolActor)
        self.precision = getattr(encoder, "precision", "fp32")
        self.runtime = getattr(encoder, "runtime", "torch")
        worker = dict(name=encoder.name, use_gpu=use_gpu, threads=threads, precision=self.precision,
                      fingerprint=encoder.fingerprint(), runtime=self.runtime, prefix=getattr(encoder, "prefix", None))
        self._actors = [actor.remote(_encode_on_worker, worker) for _ in range(count)]

    def fingerprint(self) -> dict[str, Any]:
        return self._local.fingerprint()

    def encode(self, sentences: Sequence[str], *, batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        sentences = list(sentences)
        if not sentences:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = max(1, min(len(self._actors), len(sentences) // MIN_SLICE))
        bounds = np.linspace(0, len(sentences), parts + 1).astype(int)
        refs = [a.run.remote((sentences[lo:hi], batch_size))
                for a, lo, hi in zip(self._actors, bounds[:-1], bounds[1:])]
        return np.concatenate([np.asarray(get(r), dtype=np.float32) for r in refs], axis=0)

    def close(self) -> None:
        ray = require_ray()
        for a in self._actors:
            ray.kill(a)
        self._actors = []
