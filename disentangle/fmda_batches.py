"""FMDA's training batches (`fmda_trainer`): B parallel pairs of one language pair, each with a
negative utterance in L1 and one in L2 drawn (seeded) from their negative pools, run through the
model as `methods.FmdaBatch`."""

from __future__ import annotations

import numpy as np

from xmine.disentangle.fmda_prep import PIVOT
from xmine.errors import ConfigError


class Stepper:
    """Builds FmdaBatch objects from the prepared data (token stores, targets, pools)."""

    def __init__(self, model, data, locales: list[str], contrastive: str = "clamped"):
        self.model, self.data, self.lang_index = model, data, {l: i for i, l in enumerate(locales)}
        self.contrastive = contrastive

    def negatives(self, loc: str, rows: np.ndarray, gen) -> np.ndarray:
        import torch

        d = self.data.data[loc]
        pool = d.pool_rows
        if len(pool) < 2:
            raise ConfigError(f"{loc}: negative pool has {len(pool)} utterance(s); too few to draw negatives")
        pick = pool[torch.randint(0, len(pool), (len(rows),), generator=gen).numpy()]
        for k, (r, p) in enumerate(zip(rows, pick)):  # never the positive itself
            if d.utts[p] == d.utts[r]:
                pick[k] = pool[(int(np.searchsorted(pool, p)) + 1) % len(pool)]
        return pick

    def parts(self, loc: str, rows: np.ndarray) -> dict:
        from xmine.disentangle.fmda import pad_batch

        store = self.data.data[loc].store
        h, mask = pad_batch([store.token_states(int(r)) for r in rows])
        return self.model(h, mask)

    def batch(self, partner: str, rows: np.ndarray, gen):
        import torch

        from xmine.disentangle.methods import FmdaBatch

        d1, d2 = self.data.data[PIVOT], self.data.data[partner]
        n1, n2 = self.negatives(PIVOT, rows, gen), self.negatives(partner, rows, gen)

        def targets(d):
            if d.template_target is None:
                z = torch.zeros(len(rows), d.store.pooled.shape[1])
                return z, z, torch.zeros(len(rows), dtype=torch.bool)
            return (torch.from_numpy(d.template_target[rows]), torch.from_numpy(d.residual_target[rows]),
                    torch.from_numpy(d.annotated[rows]))

        tp1, rs1, has1 = targets(d1)
        tp2, rs2, has2 = targets(d2)
        b = len(rows)
        return FmdaBatch(
            parts_l1=self.parts(PIVOT, rows), parts_l2=self.parts(partner, rows),
            parts_l1_neg=self.parts(PIVOT, n1), parts_l2_neg=self.parts(partner, n2),
            utt_l1=torch.from_numpy(np.asarray(d1.store.pooled[rows])),
            utt_l2=torch.from_numpy(np.asarray(d2.store.pooled[rows])),
            tp_tgt_l1=tp1, tp_tgt_l2=tp2, rs_tgt_l1=rs1, rs_tgt_l2=rs2, has_tgt_l1=has1, has_tgt_l2=has2,
            lang_l1=torch.full((b,), self.lang_index[PIVOT], dtype=torch.long),
            lang_l2=torch.full((b,), self.lang_index[partner], dtype=torch.long), model=self.model,
            contrastive=self.contrastive)


def batches(rows: np.ndarray, partners: list[str], batch_size: int, gen, *, shuffle: bool) -> list[tuple[str, np.ndarray]]:
    import torch

    out = []
    for p in partners:
        r = rows[torch.randperm(len(rows), generator=gen).numpy()] if shuffle else rows
        chunks = [r[i:i + batch_size] for i in range(0, len(r), batch_size)]
        if len(chunks) > 1 and len(chunks[-1]) < 2:
            chunks[-2] = np.concatenate([chunks[-2], chunks.pop()])
        out += [(p, c) for c in chunks if len(c) >= 2]
    if shuffle:
        out = [out[i] for i in torch.randperm(len(out), generator=gen).tolist()]
    return out
