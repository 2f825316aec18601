"""The rows of one side that take part in mining: first occurrences of each sentence, within the
length bounds, in the side's language (the automatic language filter), then what the pre-search
cleaning keeps; with the map from every row to its representative among them."""

from __future__ import annotations

import numpy as np

from xmine.mining.filter_step import language_filter
from xmine.mining.select import MiningConfig, length_mask
from xmine.store.rows import RowSubset


class Mineable:
    """A side's rows that take part: first occurrences within the length bounds (then `restrict`)."""

    def __init__(self, side, config: MiningConfig, *, lang_filter: tuple[str, str, float] | None = None,
                 forced: bool = False, role: str = "src"):
        first, self.representative = side.unique_rows()
        self.side = side
        self.unique = len(first)
        lengths = np.asarray(side.row_index.lengths)
        ok = length_mask(lengths[first], config)
        self.ids = first[ok] if ok is not None else first
        self.other_language, self.lang_filter_skipped = 0, None
        if lang_filter is not None:  # (language, LID backend, min confidence): drop other languages
            self.ids, self.other_language, self.lang_filter_skipped = language_filter(
                side, self.ids, lang_filter, forced=forced, role=role)
        self._index()

    def restrict(self, clean) -> None:
        """Search only the rows the pre-search cleaning keeps (`presearch.SideClean` over `ids`);
        a near-duplicate's rows stand for its representative, as an exact repeat's do."""
        to = np.arange(len(self.representative), dtype=np.int64)
        to[self.ids] = self.ids[clean.representative]
        self.representative = to[self.representative]
        self.ids = self.ids[clean.keep]
        self._index()

    def _index(self) -> None:
        lengths = np.asarray(self.side.row_index.lengths)
        self.lengths = lengths[self.ids].astype(np.int64)
        self.rows = RowSubset(self.side.rows, self.ids)
        # For a side's own index: row -> position of its representative among self.ids (-1: not mined)
        pos = np.full(len(lengths), -1, dtype=np.int64)
        pos[self.ids] = np.arange(len(self.ids))
        self.position_of_row = pos[self.representative]
