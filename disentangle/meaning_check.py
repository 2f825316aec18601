"""Whether training kept the meaning part a meaning: its held-out translation retrieval against the
untrained model's.

A method's validation loss need not hold the meaning part to the translations: MEAT's (L_R + L_CR +
L_L, its adversarial L_A left out as every method's is) falls as the language part takes over the
whole embedding, so a `--lr` far too high gave a falling loss and a meaning part retrieving 9-12% of
118 translations it never saw, where raw embeddings retrieve all (a helper's run: MEAT on 600
Tatoeba pairs at --lr 10, exit 0). The loss refusal (`trainer`) cannot see that; this check can.

The measure: accuracy@1 of source -> target retrieval by the meaning parts' cosine among the held-out
pairs of each language pair (the rows of a group only), over the groups holding at least
`MIN_ROWS` of them (fewer: chance is too high for the number to say anything). The rule: refuse a
projection whose meaning part retrieves less than `KEPT_SHARE` of what the untrained model's does.
Measured on 300 FLORES de-en pairs (30 held out, use-m3, 8 epochs): every method at --lr 1e-3, and
MEAT at 0.1, kept 100% (untrained: 100%); MEAT at --lr 1 and 10 kept 53% and 50%, at 1000 none. A
sensible run keeps about all (the methods are trained to keep translations together); a broken one
loses half or more, which a held-out set of 20 rows still tells from a few rows' noise.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from xmine.errors import ConfigError

#: held-out pairs a language pair needs to be measured on (chance is 1 in that many)
MIN_ROWS = 20
#: the share of the untrained model's retrieval a kept epoch must reach
KEPT_SHARE = 0.75


def meaning_retrieval(model, data) -> float | None:
    """Held-out accuracy@1 of the meaning parts (see the module doc); None where no language pair
    holds `MIN_ROWS` held-out pairs."""
    import torch

    hits = rows = 0
    model.eval()
    with torch.no_grad():
        for group in np.unique(data.group[data.valid_idx]):
            idx = data.valid_idx[data.group[data.valid_idx] == group]
            if len(idx) < MIN_ROWS:
                continue
            r = torch.from_numpy(idx)
            m_s = torch.nn.functional.normalize(model(data.e_s[r], data.lang_s[r])[0], dim=-1, eps=1e-12)
            m_t = torch.nn.functional.normalize(model(data.e_t[r], data.lang_t[r])[0], dim=-1, eps=1e-12)
            hits += int((torch.argmax(m_s @ m_t.T, dim=1) == torch.arange(len(idx))).sum())
            rows += len(idx)
    model.train()
    return hits / rows if rows else None


def check_meaning_kept(state: dict, model, data, *, lr: float, checkpoint: Path) -> None:
    """Refuse (ConfigError) the model at its kept epoch where its meaning part retrieves less than
    `KEPT_SHARE` of what the untrained model's does (`state["initial_meaning_retrieval"]`, measured before the first
    epoch; absent in a checkpoint written before this check: not checked)."""
    kept = meaning_retrieval(model, data)
    untrained = state.get("initial_meaning_retrieval")
    if kept is not None and untrained is not None and kept < KEPT_SHARE * untrained:
        raise ConfigError(f"training lost the meaning part: it retrieves {kept:.1%} of the held-out translations at "
                          f"its best epoch ({state['best_epoch']}), the untrained model {untrained:.1%}, at --lr "
                          f"{lr:g}; no projection written: lower --lr (with --restart, as its checkpoint in "
                          f"{checkpoint.parent} is of this --lr)")


__all__ = ["KEPT_SHARE", "MIN_ROWS", "check_meaning_kept", "meaning_retrieval"]
