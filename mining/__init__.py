"""Bitext mining: exact blocked kNN (or FAISS indexes), margin scores, retrieval modes.

Library API:
- `mine_embeddings(x, y, *, config=MiningConfig(...)) -> MinedPairs` on arrays;
- `xmine.mining.pipeline.mine(MineConfig(...))` on files / embedding stores / index dirs (the
  configs: xmine.mining.config);
- `knn.exact_knn_both`, `select.margin_score`, `select.select_pairs`, `select.greedy_one_to_one`.
"""

from xmine.mining.select import MinedPairs, MiningConfig, mine_embeddings, select_pairs

__all__ = ["MinedPairs", "MiningConfig", "mine_embeddings", "select_pairs"]
