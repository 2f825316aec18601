"""Small sentence-transformers models the tests build: a BERT with random weights, a WordPiece
vocabulary of the characters of the sentences it will see, prompts in its config. Saved with
`SentenceTransformer.save`, so xmine loads it as it loads any model folder."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable


def build_tiny_bert(out_dir: Path, sentences: Iterable[str], *, prompts: dict[str, str] | None = None,
                    default_prompt_name: str | None = None, seed: int = 0, hidden: int = 64,
                    init_std: float = 0.5, vocab_size: int | None = None) -> Path:
    """A random-weights BERT sentence-transformers model (mean pooling, Normalize) in `out_dir`;
    `init_std` well above BERT's 0.02 makes its embeddings of different texts differ (with 0.02 they
    all point nearly one way). `vocab_size`: the model's, where not its tokenizer's (a mismatch)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    try:
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.models import Normalize, Pooling, Transformer

    out_dir = Path(out_dir)
    chars = sorted({c for s in [*sentences, *(prompts or {}).values()] for c in s if not c.isspace()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars)]
    hf = out_dir.parent / f".{out_dir.name}-hf"
    hf.mkdir(parents=True, exist_ok=True)
    (hf / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(hf / "vocab.txt"), do_lower_case=False, model_max_length=128)
    if len(tokenizer) < len(vocab):  # transformers 5 reads `vocab` and ignores `vocab_file` (was: 5 tokens, all [UNK])
        tokenizer = BertTokenizerFast(vocab=str(hf / "vocab.txt"), do_lower_case=False, model_max_length=128)
    assert len(tokenizer) == len(vocab), (len(tokenizer), len(vocab))
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=vocab_size or len(vocab), hidden_size=hidden, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=2 * hidden, max_position_embeddings=128, initializer_range=init_std)
    BertModel(config).save_pretrained(hf)
    tokenizer.save_pretrained(hf)
    transformer = Transformer(str(hf), max_seq_length=128)
    model = SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean"),
                                         Normalize()], device="cpu", prompts=prompts,
                                default_prompt_name=default_prompt_name)
    model.save(str(out_dir))
    return out_dir
