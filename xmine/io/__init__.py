"""Reading what users bring: corpus files in every format (plain or compressed text, JSON Lines,
CSV/TSV, Parquet, Hugging Face datasets), standard input and fsspec URLs, sentence splitting,
line-aligned parallel files, the record fields that travel with a sentence, and deduplication.

Every command that reads a corpus goes through `xmine.io.readers` (one reader per format, each
streaming `(record number, text, record id)`); `xmine.io.corpus` adds the input policy (what is
checked, what a bad line is)."""
