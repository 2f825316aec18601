"""xmine: mine bitext and retrieve across languages with disentangled sentence embeddings.

The import package `xmine` holds what every part shares (encoders, corpus reading, the
embedding store, provenance, the CLI). Its subpackages live in the repository's top-level
folders: `xmine.mining` (mining/), `xmine.index` (index/), `xmine.disentangle` (disentangle/)
and `xmine.benchmarks` (benchmarks/).
"""

__version__ = "0.1.0"
