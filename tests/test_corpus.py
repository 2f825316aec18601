"""Reading corpora: the input policy of xmine.io.corpus, on small files written here."""

from __future__ import annotations

import gzip
import logging

import numpy as np
import pytest

from xmine.io.compression import count_lines
from xmine.io.corpus import iter_corpus, read_corpus, read_parallel, truncate_for_encoding
from xmine.io.dedup import dedup
from xmine.errors import InputError


def write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_empty_lines_keep_line_numbers_and_are_counted(tmp_path, caplog):
    p = write(tmp_path, "a.txt", b"eins\n\n   \nzwei\n\t\ndrei")
    with caplog.at_level(logging.WARNING, logger="xmine.io.corpus"):
        c = read_corpus(p)
    assert c.sentences == ["eins", "zwei", "drei"]
    assert c.line_numbers.tolist() == [1, 4, 6]
    assert c.line_numbers.dtype == np.int64
    assert c.stats.empty_lines == 3 and c.stats.lines == 6 and c.stats.sentences == 3
    assert any("3 empty line(s)" in r.getMessage() and str(p) in r.getMessage() for r in caplog.records)


def test_lines_of_invisible_characters_are_empty_lines_and_words_keep_theirs(tmp_path, data_dir):
    """A line of zero-width spaces, joiners, a word joiner or a soft hyphen shows nothing: it is an
    empty line, as embed, build-index and a JSON Lines record read it (was: a sentence, embedded as a
    vector of nothing); a joiner inside a word (Persian's non-joiner) stays part of it."""
    from clitools import ok, xm

    from xmine.store import EmbeddingStore

    lines = ["\u200b", "eins", "\u200c\u200d \u2060", "\u00ad", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "\ufeff "]
    p = write(tmp_path, "a.txt", ("\n".join(lines) + "\n").encode("utf-8"))
    c = read_corpus(p)
    assert c.sentences == ["eins", lines[4]] and c.line_numbers.tolist() == [2, 5] and c.stats.empty_lines == 4
    with pytest.raises(InputError, match="no sentence"):
        read_corpus(write(tmp_path, "z.txt", "\u200b\n\u2060\u200b\n".encode("utf-8")))
    (tmp_path / "a.jsonl").write_text("".join(f'{{"text": "{t}"}}\n' for t in lines), encoding="utf-8")
    for name in ("a.txt", "a.jsonl"):
        ok(xm("embed", tmp_path / name, "--lang", "fa", "-o", tmp_path / f"{name}.store", "-q"))
        store = EmbeddingStore.open(tmp_path / f"{name}.store")
        assert len(store) == 2 and store.line_numbers.tolist() == [2, 5], name


def test_crlf_bom_and_inner_tabs(tmp_path):
    p = write(tmp_path, "win.txt", "\ufeffErste Zeile\r\nzweite\tmit Tab\r\nend\rx\r\n".encode("utf-8"))
    c = read_corpus(p)
    # BOM gone, \r\n gone, tab and stray \r turned into spaces (they would break TSV / line files)
    assert c.sentences == ["Erste Zeile", "zweite mit Tab", "end x"]
    assert c.stats.replaced_count == 2


def test_the_bom_of_each_file_joined_into_one_is_stripped(tmp_path):
    """(a helper: `cat a.txt b.txt`, each with a BOM: line 3 was stored as "\\ufeffHallo", mined
    with it, and counted as another sentence than line 1)"""
    one = "\ufeffHallo Welt\nGuten Morgen\n".encode("utf-8")
    c = read_corpus(write(tmp_path, "joined.txt", one + one))
    assert c.sentences == ["Hallo Welt", "Guten Morgen"] * 2 and c.stats.replaced_count == 0
    # and of CSV files joined so (was: only the first file's, its csv reader's utf-8-sig)
    from xmine.io.delimited import delimited_rows

    table = '\ufeff"Hallo, Welt",1\nGuten Morgen,2\n'.encode("utf-8")
    assert list(delimited_rows(write(tmp_path, "joined.csv", table + table), "csv")) == [
        (1, ["Hallo, Welt", "1"]), (2, ["Guten Morgen", "2"]), (3, ["Hallo, Welt", "1"]), (4, ["Guten Morgen", "2"])]


def test_a_file_of_tab_separated_columns_read_as_text_is_pointed_to_the_tsv_reader(tmp_path):
    """Every line holding a tab is how a column file read as sentences looks (`1<TAB>Hallo` encoded
    as "1 Hallo"): the warning names the options that read a column; a stray tab does not."""
    columns = read_corpus(write(tmp_path, "de.tsv", b"1\tHallo Welt\n2\tGuten Morgen\n"))
    assert columns.sentences == ["1 Hallo Welt", "2 Guten Morgen"]
    [said] = columns.stats.warnings(2000)
    assert "2 line(s) replaced by spaces" in said and "--input-format tsv" in said and "--text-column" in said
    stray = read_corpus(write(tmp_path, "a.txt", b"eins\tzwei\ndrei\n"))
    [said] = stray.stats.warnings(2000)
    assert "1 line(s) replaced by spaces" in said and "--input-format" not in said
    # a line break inside every line, no tab: no column file (was: pointed to the tsv reader)
    breaks = read_corpus(write(tmp_path, "b.txt", "eins\u2028zwei\ndrei\u2028vier\n".encode()))
    [said] = breaks.stats.warnings(2000)
    assert "2 line(s) replaced by spaces" in said and "--input-format" not in said


def test_text_is_otherwise_unchanged(tmp_path):
    """Whitespace around a sentence is not part of it (it would change its embedding: was kept, and
    `score` and the duplicate check read the sentence without it); the rest is kept as it is."""
    s = "Größe: 5 €  —  naïve 東京"
    c = read_corpus(write(tmp_path, "u.txt", f"  {s} \u00a0\n".encode()))
    assert c.sentences == [s]


@pytest.mark.parametrize("name", ["plain.txt.gz", "no_suffix_but_gzip"])
def test_gzip_detected_by_magic_bytes(tmp_path, name):
    p = tmp_path / name
    with gzip.open(p, "wb") as f:
        f.write("a\n\nb\nc\n".encode())
    c = read_corpus(p)
    assert c.sentences == ["a", "b", "c"]
    assert c.line_numbers.tolist() == [1, 3, 4]
    assert c.stats.gzip
    assert count_lines(p) == 4


def test_plain_file_named_gz_is_read_as_text(tmp_path):
    c = read_corpus(write(tmp_path, "fake.gz", b"not gzip\n"))
    assert c.sentences == ["not gzip"] and not c.stats.gzip


def test_invalid_utf8_names_file_line_and_byte(tmp_path):
    p = write(tmp_path, "latin1.txt", "gut\nauch gut\nfalsch: Gr\xf6\xdfe\n".encode("latin-1"))
    with pytest.raises(InputError) as e:
        read_corpus(p)
    assert e.value.line == 3 and e.value.path == p
    msg = str(e.value)
    assert f"{p}:3" in msg and "invalid UTF-8" in msg and "byte 10" in msg and "xf6" in msg


def test_invalid_utf8_in_gzip_names_line(tmp_path):
    p = tmp_path / "bad.gz"
    with gzip.open(p, "wb") as f:
        f.write(b"ok\n\xff\xfe\n")
    with pytest.raises(InputError) as e:
        read_corpus(p)
    assert e.value.line == 2


def test_nul_byte_names_line(tmp_path):
    p = write(tmp_path, "nul.txt", b"a\nb\nc\x00d\n")
    with pytest.raises(InputError, match="NUL byte") as e:
        read_corpus(p)
    assert e.value.line == 3 and str(p) in str(e.value)


def test_utf16_file_is_refused(tmp_path):
    p = write(tmp_path, "u16.txt", "hallo\nwelt\n".encode("utf-16"))
    with pytest.raises(InputError) as e:
        read_corpus(p)
    assert e.value.line == 1


def test_streaming_yields_good_lines_before_a_later_error(tmp_path):
    p = write(tmp_path, "late.txt", b"one\ntwo\n\xff\n")
    it = iter_corpus(p)
    assert next(it) == (1, "one")
    assert next(it) == (2, "two")
    with pytest.raises(InputError) as e:
        next(it)
    assert e.value.line == 3


def test_missing_directory_empty_and_blank_files(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_corpus(tmp_path / "nope.txt")
    with pytest.raises(InputError, match="is a directory"):
        read_corpus(tmp_path)
    with pytest.raises(InputError, match="file is empty"):
        read_corpus(write(tmp_path, "empty.txt", b""))
    with pytest.raises(InputError, match="no sentence") as e:
        read_corpus(write(tmp_path, "blank.txt", b"\n  \n\t\n"))
    assert e.value.path.name == "blank.txt"


def test_corrupt_gzip_is_an_input_error(tmp_path):
    good = gzip.compress(("x\n" * 10000).encode())
    p = write(tmp_path, "trunc.gz", good[: len(good) // 2])
    with pytest.raises(InputError, match="gzip"):
        read_corpus(p)


def test_long_lines_warned_kept_whole_and_cut_for_encoding(tmp_path, caplog):
    long = "x" * 50
    p = write(tmp_path, "long.txt", f"short\n{long}\nok\n{long}y\n".encode())
    with caplog.at_level(logging.WARNING, logger="xmine.io.corpus"):
        c = read_corpus(p, max_chars=20)
    assert c.sentences[1] == long  # the text is kept whole for output
    assert c.stats.long_count == 2 and c.stats.long_lines == [2, 4]
    assert any("lines 2, 4" in r.getMessage() for r in caplog.records)
    cut = truncate_for_encoding(c.sentences, 20)
    assert cut == ["short", "x" * 20, "ok", "x" * 20]


def test_count_lines_with_and_without_final_newline(tmp_path):
    assert count_lines(write(tmp_path, "a", b"a\nb\n")) == 2
    assert count_lines(write(tmp_path, "b", b"a\nb")) == 2
    assert count_lines(write(tmp_path, "c", b"\n")) == 1


def test_parallel_files_of_different_length(tmp_path):
    src = write(tmp_path, "x.de", b"a\nb\nc\n")
    tgt = write(tmp_path, "x.en", b"A\nB\n")
    with pytest.raises(InputError) as e:
        read_parallel(src, tgt)
    msg = str(e.value)
    assert str(src) in msg and str(tgt) in msg and "3 line(s)" in msg and "has 2" in msg


def test_parallel_drops_pairs_empty_on_either_side(tmp_path):
    src = write(tmp_path, "x.de", b"a\n\nc\nd\n")
    tgt = write(tmp_path, "x.en", b"A\nB\n\nD")
    assert read_parallel(src, tgt) == (["a", "d"], ["A", "D"])


def test_parallel_sides_are_stripped_as_a_corpus_sentence_is(tmp_path):
    # A training pair must be the sentence `xmine mine` later embeds: iter_corpus strips it.
    src = write(tmp_path, "x.de", "  a \u00a0\nb\t\n".encode())
    tgt = write(tmp_path, "x.en", b" A\nB  \n")
    assert read_parallel(src, tgt) == (["a", "b"], ["A", "B"])
    assert [s for _, s in iter_corpus(src)] == ["a", "b"]


def test_parallel_side_with_a_tab_in_every_line_is_refused_as_both_columns_in_one_file(tmp_path):
    """(a helper: `train` warned "give --input-format tsv --text-column N", options it has not, and
    trained on both languages as one side's sentences)"""
    tsv = write(tmp_path, "x.de", "Hallo Welt\tHello world\n\nGuten Tag\tGood day\n".encode())
    en = write(tmp_path, "x.en", b"Hello world\nB\nGood day\n")
    with pytest.raises(InputError, match=r"x\.de: every line holds a tab.*cut -f1"):
        read_parallel(tsv, en)
    # a tab in some lines, or at the end of every line, is text: read with the tab a space
    some = write(tmp_path, "y.de", "Hallo\tWelt\nGuten Tag\n".encode())
    trailing = write(tmp_path, "z.de", "Hallo Welt\t\nGuten Tag\t\n".encode())
    en2 = write(tmp_path, "y.en", b"Hello world\nGood day\n")
    assert read_parallel(some, en2) == (["Hallo Welt", "Guten Tag"], ["Hello world", "Good day"])
    assert read_parallel(trailing, en2) == (["Hallo Welt", "Guten Tag"], ["Hello world", "Good day"])


def test_parallel_bad_utf8_names_the_right_file(tmp_path):
    src = write(tmp_path, "x.de", b"a\nb\n")
    tgt = write(tmp_path, "x.en", b"A\n\xc3\n")
    with pytest.raises(InputError) as e:
        read_parallel(src, tgt)
    assert e.value.path == tgt and e.value.line == 2


def test_dedup_maps_back_to_first_occurrence():
    sents = ["Hallo Welt", "Guten Tag", " Hallo   Welt ", "hallo welt", "Guten Tag", "Hallo\u00a0Welt"]
    unique, inverse, first = dedup(sents, return_first=True)
    # white space is normalised (incl. no-break space), case is not
    assert unique == ["Hallo Welt", "Guten Tag", "hallo welt"]
    assert inverse.tolist() == [0, 1, 0, 2, 1, 0]
    assert first.tolist() == [0, 1, 3]
    assert [unique[j] for j in inverse][3] == "hallo welt"
    u2, inv2 = dedup([])
    assert u2 == [] and inv2.shape == (0,)


@pytest.mark.parametrize("cr", [False, True])
def test_a_line_longer_than_any_sentence_or_record_is_one_error_before_it_is_read_whole(tmp_path, cr):
    """(was: a 970 KB .gz expanding to one 2 GB line took 4 GB of memory, then a MemoryError
    traceback; the check reads at most MAX_LINE_BYTES of it)"""
    from xmine.io.corpus import MAX_LINE_BYTES, iter_lines

    end = b"\r" if cr else b"\n"
    path = tmp_path / "bomb.txt.gz"
    path.write_bytes(gzip.compress(b"fine" + end + b"a" * (MAX_LINE_BYTES + 10) + end + b"after" + end, 1))
    lines = iter_lines(path)
    assert next(lines) == (1, "fine")
    with pytest.raises(InputError, match=r"bomb.txt.gz:2: longer than 64 MiB: no sentence nor record"):
        next(lines)


def test_a_parquet_file_read_as_text_is_named_as_one(tmp_path):
    """(a helper: a Parquet file named without .parquet was "binary data or a UTF-16 file")"""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["Hallo Welt"]}), tmp_path / "noext")
    with pytest.raises(InputError, match=r"noext:1: NUL byte at byte \d+ of the line: a Parquet file \(name it "
                                         r"\.parquet, or give its format\)"):
        read_corpus(tmp_path / "noext")
    (tmp_path / "utf16.txt").write_bytes("Hallo\n".encode("utf-16-le"))
    with pytest.raises(InputError, match="binary data or a UTF-16 file"):
        read_corpus(tmp_path / "utf16.txt")
