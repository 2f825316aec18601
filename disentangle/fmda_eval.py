"""What FMDA training is judged on (`fmda_trainer`): the dev loss (the terms training optimises),
the meaning part's dev retrieval, and the language part's centroids with their dev accuracy."""

from __future__ import annotations

from typing import Any

from xmine.disentangle.fmda_batches import batches
from xmine.disentangle.fmda_prep import PIVOT
from xmine.disentangle.trainer import mean_terms


def _part(stepper, loc: str, rows, part: str):
    """The L2-normalised `part` of `rows` of locale `loc`, 256 rows a forward pass."""
    import torch
    import torch.nn.functional as F

    with torch.no_grad():
        return F.normalize(torch.cat([stepper.parts(loc, rows[s:s + 256])[part] for s in range(0, len(rows), 256)]),
                           dim=-1, eps=1e-12)


def dev_loss(stepper, data, config, trained: set[str]) -> tuple[float, dict[str, float]]:
    from xmine.disentangle.methods import fmda_terms

    def terms(unit, gen):
        values, _ = fmda_terms(stepper.batch(*unit, gen))
        return {k: v for k, v in values.items() if k in trained}, len(unit[1])

    means, _ = mean_terms(stepper.model, config.seed + 1,
                          batches(data.dev_rows, config.partners, config.batch_size, None, shuffle=False), terms)
    return sum(means.values()), means


def dev_retrieval(stepper, data, config) -> float:
    """Accuracy@1 of the meaning part on the dev rows: each en-US row retrieves its partner row
    among all dev rows of the partner by cosine, and back; the mean over directions and partners."""
    import torch

    stepper.model.eval()
    accs = []
    gold = torch.arange(len(data.dev_rows))
    for p in config.partners:
        sim = _part(stepper, PIVOT, data.dev_rows, "meaning") @ _part(stepper, p, data.dev_rows, "meaning").T
        accs += [float((sim.argmax(1) == gold).float().mean()), float((sim.argmax(0) == gold).float().mean())]
    stepper.model.train()
    return sum(accs) / len(accs)


def fit_langid(stepper, data, locales) -> dict[str, Any]:
    """Language-part centroids from train rows (stored for `langid`), accuracy on dev rows."""
    import torch
    import torch.nn.functional as F

    model = stepper.model
    model.eval()
    cent = torch.zeros(len(locales), model.dim)
    tr = data.train_rows[:2000]
    for i, loc in enumerate(locales):
        cent[i] = F.normalize(_part(stepper, loc, tr, "language").mean(0), dim=0, eps=1e-12)
    model.langid_centroids.copy_(cent)
    ok = total = 0
    per = {}
    for i, loc in enumerate(locales):
        pred = (_part(stepper, loc, data.dev_rows, "language") @ cent.T).argmax(1)
        per[loc] = float((pred == i).float().mean())
        ok += int((pred == i).sum())
        total += len(pred)
    return {"accuracy": ok / max(total, 1), "per_language": per, "sentences": total}
