"""`xmine score`: scoring a bitext one already has, on real FLORES lines with the real encoder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clitools import ok, refused, warned, xm
from tests.flores import flores_lines


def _bitext(data_dir, n_true: int, n_shuffled: int):
    """(de, en, is_true) rows: n_true aligned FLORES pairs, then n_shuffled misaligned ones (each
    German sentence with the English translation of the next one), interleaved."""
    de = flores_lines(data_dir, "deu_Latn", n_true + n_shuffled)
    en = flores_lines(data_dir, "eng_Latn", n_true + n_shuffled)
    true = [(de[i], en[i], True) for i in range(n_true)]
    shifted = [(de[n_true + j], en[n_true + (j + 1) % n_shuffled], False) for j in range(n_shuffled)]
    rows = []
    for a, b in zip(true, shifted):
        rows += [a, b]
    return rows + true[len(shifted):] + shifted[len(true):]


@pytest.mark.slow
def test_score_keeps_true_pairs_and_drops_shuffled_ones(data_dir, tmp_path):
    rows = _bitext(data_dir, 200, 200)
    tsv = tmp_path / "bitext.tsv"
    tsv.write_text("".join(f"{de}\t{en}\n" for de, en, _ in rows), encoding="utf-8")
    out = tmp_path / "scored.tsv"
    ok(xm("score", tsv, "--src-lang", "de", "--tgt-lang", "en", "-o", out, "-q"))
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(rows)
    kept = {True: 0, False: 0}
    for line, (de, en, is_true) in zip(lines, rows):
        src, tgt, cosine, margin, keep, rule = line.split("\t")
        assert (src, tgt) == (de, en)  # the bitext's own rows, in its order
        assert (keep == "1") == (rule == "")
        kept[is_true] += keep == "1"
    assert kept[True] >= 190, kept
    assert kept[False] <= 10, kept
    summary = json.loads((tmp_path / "scored.tsv.json").read_text())
    assert summary["kept"] == kept[True] + kept[False]
    assert summary["threshold"]["value"] is not None and "SHIPPED.json" in summary["threshold"]["source"]
    assert summary["dropped"]["threshold"] >= 190


def test_score_a_jsonl_bitext_keeps_its_records_and_writes_only_the_kept(data_dir, tmp_path):
    rows = _bitext(data_dir, 20, 20)
    src = tmp_path / "pairs.jsonl"
    src.write_text("".join(json.dumps({"translation": {"de": de, "en": en}, "url": f"https://x/{i}"},
                                      ensure_ascii=False) + "\n" for i, (de, en, _) in enumerate(rows)),
                   encoding="utf-8")
    out = tmp_path / "kept.jsonl"
    ok(xm("score", src, "--src-lang", "de", "--tgt-lang", "en", "-o", out, "--kept-only", "-q"))
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    truth = {f"https://x/{i}": t for i, (_, _, t) in enumerate(rows)}
    assert written and all(r["keep"] is True and r["rule"] == "" for r in written)
    assert sum(truth[r["url"]] for r in written) >= 18
    assert sum(not truth[r["url"]] for r in written) <= 2
    assert set(written[0]) == {"translation", "url", "cosine", "margin", "keep", "rule"}


@pytest.mark.slow
def test_score_a_moses_pair_with_the_neighbourhoods_of_other_corpora(data_dir, tmp_path):
    rows = _bitext(data_dir, 30, 30)
    (tmp_path / "b.de").write_text("".join(r[0] + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "b.en").write_text("".join(r[1] + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "c.de").write_text("\n".join(flores_lines(data_dir, "deu_Latn", 100, start=300)) + "\n")
    (tmp_path / "c.en").write_text("\n".join(flores_lines(data_dir, "eng_Latn", 100, start=300)) + "\n")
    own, other = tmp_path / "own.tsv", tmp_path / "other.tsv"
    ok(xm("score", f"{tmp_path / 'b.de'}:{tmp_path / 'b.en'}", "--src-lang", "de", "--tgt-lang", "en", "-o", own,
          "--threshold", "none", "-q"))
    ok(xm("score", "--src", tmp_path / "b.de", "--tgt", tmp_path / "b.en", "--src-corpus", tmp_path / "c.de",
          "--tgt-corpus", tmp_path / "c.en", "-o", other, "--threshold", "none", "-q"))
    a = [line.split("\t") for line in own.read_text(encoding="utf-8").splitlines()]
    b = [line.split("\t") for line in other.read_text(encoding="utf-8").splitlines()]
    assert [r[:3] for r in a] == [r[:3] for r in b]  # same pairs, same cosines
    assert [r[3] for r in a] != [r[3] for r in b]  # other neighbourhoods, other margins
    # Against unrelated sentences every true pair stands out more than against its own bitext,
    # whose neighbourhoods hold the translations themselves.
    margins = [(float(x[3]), float(y[3])) for x, y, r in zip(a, b, rows) if r[2]]
    assert all(y > x for x, y in margins)


def test_corpora_of_the_swapped_languages_are_refused_before_anything_is_written(data_dir, tmp_path):
    """--src-corpus of the target language and --tgt-corpus of the source's (given the wrong way
    round): refused naming the file, before anything is encoded or written (was: scored, every margin
    against neighbours of the wrong language); a corpus with some lines of the other language is not."""
    rows = _bitext(data_dir, 10, 10)
    (tmp_path / "b.de").write_text("".join(r[0] + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "b.en").write_text("".join(r[1] + "\n" for r in rows), encoding="utf-8")
    de, en = flores_lines(data_dir, "deu_Latn", 100, start=300), flores_lines(data_dir, "eng_Latn", 100, start=300)
    (tmp_path / "c.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "c.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    base = ("score", "--src", tmp_path / "b.de", "--tgt", tmp_path / "b.en", "--src-lang", "de", "--tgt-lang", "en",
            "-o", tmp_path / "s.tsv", "-q")
    said = refused(xm(*base, "--src-corpus", tmp_path / "c.en", "--tgt-corpus", tmp_path / "c.de"),
                   str(tmp_path / "c.en"), "--src-corpus gives the de side's neighbours, but", "sentences are en",
                   "are the corpora swapped?")
    assert "of its first 100 sentences" in said
    refused(xm(*base, "--tgt-corpus", tmp_path / "c.de"), str(tmp_path / "c.de"), "--tgt-corpus gives the en side's")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.de", "b.en", "c.de", "c.en"]
    # a third of the German corpus in English (a crawl's boilerplate): taken
    (tmp_path / "mixed.de").write_text("\n".join(de[:70] + en[:30]) + "\n", encoding="utf-8")
    ok(xm(*base, "--src-corpus", tmp_path / "mixed.de", "--tgt-corpus", tmp_path / "c.en", "--threshold", "none"))


@pytest.mark.parametrize("name, content, fragments", [
    ("b.tsv", "Hallo\tHello\nnur eine Spalte\nGut\tGood\n", ("b.tsv:2", "1 column(s), but line 1 has 2",
                                                               "(a field and its tab missing?)")),
    # one more: the scores would be written one column further right on that line alone
    ("b.tsv", "Hallo\tHello\nGut\tGood\ta\nJa\tYes\n", ("b.tsv:2", "3 column(s), but line 1 has 2")),
    ("b.csv", 'de,en\nHallo,Hello\nGut,Good,x\n', ("b.csv:3", "3 column(s), but line 1 has 2")),
    ("b.csv", '\nde,en\nHallo,Hello\nGut,Good,x\n', ("b.csv:4", "3 column(s), but line 2 has 2")),
    ("b.jsonl", '{"src": "a", "tgt": "b"}\n{"src": "a", \n', ("b.jsonl:2", "invalid JSON")),
    ("b.jsonl", '{"src": "a", "tgt": "b"}\n{"src": "a", "tgt": 3}\n', ("b.jsonl:2", "'tgt'", "not a string")),
    ("b.csv", 'de,en\n"Hallo, Welt",Hello\n"offen,x\n', ("b.csv:3", "malformed CSV")),
    # no text (was: a NUL refused naming the staged side under OUT.work/, a lone surrogate a traceback)
    ("b.jsonl", '{"src": "a", "tgt": "b"}\n{"src": "a\\u0000", "tgt": "b"}\n', ("b.jsonl:2", "'src' holds a NUL")),
    ("b.jsonl", '{"src": "a", "tgt": "\\ud800"}\n', ("b.jsonl:1", "'tgt' holds a lone surrogate (\\ud800)")),
    ("b.jsonl", '{"src": "a", "tgt": 3}\n', ("b.jsonl:1", "field 'tgt' is a number, not a string")),
])
def test_a_malformed_row_is_one_line_naming_file_and_line(tmp_path, name, content, fragments):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    out = tmp_path / "out.tsv"
    refused(xm("score", path, "-o", out), *fragments)
    assert not out.exists() and not (tmp_path / "out.tsv.json").exists()


def test_one_column_for_both_sides_is_refused(tmp_path):
    path = tmp_path / "b.tsv"
    path.write_text("Hallo\tHello\nGut\tGood\n", encoding="utf-8")
    refused(xm("score", path, "--src-column", 2, "--tgt-column", 2, "-o", tmp_path / "o.tsv"), "both name '2'")
    named = tmp_path / "b.csv"
    named.write_text("de,en\nHallo,Hello\n", encoding="utf-8")
    refused(xm("score", named, "--src-field", "de", "--tgt-field", 1, "-o", tmp_path / "o.tsv"),
            "both name column 1 of", "b.csv")
    # a reading option of another format, a language filter limit with the filters off (a fuzz: each
    # was read and dropped)
    refused(xm("score", path, "--split", "test", "-o", tmp_path / "o.tsv"),
            "--split does not apply to PAIRS read as tsv; it is for hf bitexts")
    (tmp_path / "b.jsonl").write_text('{"src": "Hallo", "tgt": "Hello"}\n', encoding="utf-8")
    refused(xm("score", tmp_path / "b.jsonl", "--no-header", "-o", tmp_path / "o.tsv"),
            "--header/--no-header does not apply to PAIRS read as jsonl; it is for tsv and csv bitexts")
    refused(xm("score", path, "--no-filters", "--lid-min-confidence", "0.5", "-o", tmp_path / "o.tsv"),
            "--no-filters switches every pair filter off: --lid-min-confidence would do nothing")
    refused(xm("score", path, "--no-filter", "language", "--lid-min-confidence", "0.5", "-o", tmp_path / "o.tsv"),
            "--no-filter language switches off the filter that --lid-min-confidence set up")
    refused(xm("score", path, "--format", "csv", "-o", tmp_path / "o.tsv"), "its name says tsv, but --format csv")
    # (a helper: column 0 was told "without a header line a column is named by its 1-based number")
    for header in ((), ("--header",)):
        refused(xm("score", path, *header, "--src-field", 0, "--tgt-field", 2, "-o", tmp_path / "o.tsv"),
                "--src-field '0': columns are numbered from 1 (the first is 1)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.csv", "b.jsonl", "b.tsv"]


def test_a_split_of_a_dataset_without_splits_is_refused(tmp_path):
    """(was: --split ignored, every row of the single Dataset scored)"""
    import datasets

    datasets.Dataset.from_dict({"src": ["Hallo.", "Gut."], "tgt": ["Hello.", "Good."]}).save_to_disk(
        str(tmp_path / "pairs"))
    refused(xm("score", tmp_path / "pairs", "--split", "test", "-o", tmp_path / "o.tsv"),
            "a single Dataset, without splits: --split test")
    # several splits and none named (was: train, without a word)
    pairs = datasets.Dataset.from_dict({"src": ["Hallo."], "tgt": ["Hello."]})
    datasets.DatasetDict({"train": pairs, "test": pairs}).save_to_disk(str(tmp_path / "dd"))
    refused(xm("score", tmp_path / "dd", "-o", tmp_path / "o.tsv"), "splits train, test: choose one with --split")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dd", "pairs"]

def test_moses_files_of_different_lengths_are_refused_naming_the_line(tmp_path):
    (tmp_path / "a.de").write_text("eins\nzwei\ndrei\n", encoding="utf-8")
    (tmp_path / "a.en").write_text("one\ntwo\n", encoding="utf-8")
    refused(xm("score", f"{tmp_path / 'a.de'}:{tmp_path / 'a.en'}", "-o", tmp_path / "o.tsv"),
            "a.en:3", "ends at line 2")


@pytest.mark.slow
def test_score_a_mined_dataset_and_a_parquet_bitext(data_dir, tmp_path):
    """xmine's own hf output scored again (its Translation column found by the languages): every
    mined pair is kept; a Parquet bitext gives Parquet rows with its own columns and the scores."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    de, en = flores_lines(data_dir, "deu_Latn", 30), flores_lines(data_dir, "eng_Latn", 30)
    (tmp_path / "de.txt").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en[::-1]) + "\n", encoding="utf-8")
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "-q",
          "--format", "hf", "-o", tmp_path / "mined"))
    mined = datasets.load_from_disk(str(tmp_path / "mined"))
    ok(xm("score", tmp_path / "mined", "--src-lang", "de", "--tgt-lang", "en", "-q", "-o", tmp_path / "s.jsonl"))
    rows = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["translation"] for r in rows] == mined["translation"] and all(r["keep"] for r in rows)

    pairs = [(d, e, i) for i, (d, e) in enumerate(zip(de, en))] + [(de[0], en[5], 99)]
    pq.write_table(pa.table({"id": [p[2] for p in pairs], "de": [p[0] for p in pairs], "en": [p[1] for p in pairs]}),
                   tmp_path / "b.parquet")
    ok(xm("score", tmp_path / "b.parquet", "--src-field", "de", "--tgt-field", "en", "--src-lang", "de",
          "--tgt-lang", "en", "-q", "-o", tmp_path / "s.parquet"))
    table = pq.read_table(tmp_path / "s.parquet").to_pylist()
    assert [r["id"] for r in table] == [p[2] for p in pairs]
    assert [r["keep"] for r in table] == [True] * 30 + [False] and table[-1]["rule"] == "threshold"


@pytest.mark.slow
def test_score_takes_mines_operating_point_and_records_it(data_dir, tmp_path):
    """--operating-point precision: the stricter calibrated threshold of the space, the same one
    `xmine mine --operating-point precision` uses, named in OUT.json; with --threshold a usage error."""
    rows = _bitext(data_dir, 30, 10)
    tsv = tmp_path / "b.tsv"
    tsv.write_text("".join(f"{de}\t{en}\n" for de, en, _ in rows), encoding="utf-8")
    records = {}
    for point in ("balanced", "precision"):
        ok(xm("score", tsv, "--src-lang", "de", "--tgt-lang", "en", "--operating-point", point, "-q",
              "-o", tmp_path / f"{point}.tsv"))
        records[point] = json.loads((tmp_path / f"{point}.tsv.json").read_text())["threshold"]
    assert records["precision"]["operating_point"] == "precision"
    assert records["precision"]["value"] > records["balanced"]["value"]
    assert "precision ratio threshold" in records["precision"]["source"]
    assert "SHIPPED.json" in records["precision"]["source"]
    kept = {p: [line.split("\t")[4] for line in (tmp_path / f"{p}.tsv").read_text(encoding="utf-8").splitlines()]
            for p in records}
    assert kept["precision"].count("1") <= kept["balanced"].count("1")
    # mine's own precision threshold in the same space is the same number
    (tmp_path / "de.txt").write_text("".join(r[0] + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "en.txt").write_text("".join(r[1] + "\n" for r in rows), encoding="utf-8")
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--src-lang", "de", "--tgt-lang", "en",
          "--operating-point", "precision", "-q", "-o", tmp_path / "m.tsv"))
    assert json.loads((tmp_path / "m.tsv.json").read_text())["threshold"] == records["precision"]
    refused(xm("score", tsv, "--threshold", "1.0", "--operating-point", "precision", "-o", tmp_path / "x.tsv"),
            "--threshold", "--operating-point")
    assert not (tmp_path / "x.tsv").exists()


@pytest.mark.slow
def test_score_with_a_calibration_record_uses_and_records_its_threshold(data_dir, tmp_path):
    """A space xmine ships a calibration for is not needed: `xmine calibrate` on 500 gold pairs of raw
    me5-small gives a record whose threshold and cap `xmine score --calibration` uses and names; a
    record of another space is refused in one line; the API takes the same record."""
    import xmine
    from xmine.mining.api import summary

    de, en = flores_lines(data_dir, "deu_Latn", 500, start=100), flores_lines(data_dir, "eng_Latn", 500, start=100)
    (tmp_path / "g.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "g.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    record = tmp_path / "cal.json"
    ok(xm("calibrate", "--projection", "none", "--src-lang", "de", "--tgt-lang", "en",
          "--gold", tmp_path / "g.de", tmp_path / "g.en", "-o", record))
    cal = json.loads(record.read_text())
    rows = _bitext(data_dir, 40, 40)
    tsv = tmp_path / "b.tsv"
    tsv.write_text("".join(f"{de}\t{en}\n" for de, en, _ in rows), encoding="utf-8")
    out = tmp_path / "s.tsv"
    ok(xm("score", tsv, "--src-lang", "de", "--tgt-lang", "en", "--projection", "none", "--calibration", record,
          "--operating-point", "precision", "-q", "-o", out))
    t = json.loads((tmp_path / "s.tsv.json").read_text())["threshold"]
    margin = cal["default_margin"]  # the margin the record names: its scores, value and cap are that margin's
    assert t["margin"] == margin == "distance"
    assert t["value"] == cal["operating_points"]["precision"][margin] and t["operating_point"] == "precision"
    assert "xmine calibrate" in t["source"] and str(record) in t["source"]
    assert t["score_max"]["value"] == cal["score_max"][margin]
    margins = [float(line.split("\t")[3]) for line in out.read_text(encoding="utf-8").splitlines()]
    keep = [line.split("\t")[4] == "1" for line in out.read_text(encoding="utf-8").splitlines()]
    assert all(k <= (m >= t["value"]) for k, m in zip(keep, margins))  # nothing below the record's threshold kept
    assert all(abs(m) < 0.5 for m in margins) and any(keep)  # distance margins (cos - neighbourhood mean), not ratios
    refused(xm("score", tsv, "--src-lang", "de", "--tgt-lang", "en", "--calibration", record, "-q",
               "-o", tmp_path / "other.tsv"), "cal.json", "raw embeddings")
    table = xmine.score([r[0] for r in rows], [r[1] for r in rows], src_lang="de", tgt_lang="en", projection="none",
                        calibration=record, operating_point="precision")
    assert table.column("keep").to_pylist() == keep
    assert summary(table)["threshold"]["value"] == t["value"]


@pytest.mark.slow
def test_an_interrupted_score_resumes_from_its_work_without_encoding_again(data_dir, tmp_path, monkeypatch):
    """A run that fails after both sides were embedded (here: while writing OUT) leaves OUT.work/;
    the same command again reuses its stores (not one embedding file rewritten) and writes what an
    uninterrupted run writes."""
    import xmine.mining.score as score_module

    rows = _bitext(data_dir, 30, 10)
    tsv = tmp_path / "b.tsv"
    tsv.write_text("".join(f"{de}\t{en}\n" for de, en, _ in rows), encoding="utf-8")
    args = ("score", tsv, "--src-lang", "de", "--tgt-lang", "en", "-q", "--keep-work")
    ok(xm(*args, "-o", tmp_path / "clean" / "s.tsv"))

    def killed(*a, **k):
        raise RuntimeError("killed while writing")

    monkeypatch.setattr(score_module, "write_scored", killed)
    out = tmp_path / "s.tsv"
    assert xm(*args, "-o", out).exit_code != 0
    monkeypatch.undo()
    assert not out.exists()
    embedded = {p: p.stat().st_mtime_ns for p in (tmp_path / "s.tsv.work").rglob("emb-*.npy")}
    assert len(embedded) >= 2  # both sides' stores survived
    ok(xm(*args, "-o", out))
    assert {p: p.stat().st_mtime_ns for p in embedded} == embedded
    assert out.read_bytes() == (tmp_path / "clean" / "s.tsv").read_bytes()

    # A work store damaged by the interruption (a shard cut short) is built again, as `mine` does,
    # not refused: OUT holds no finished result, so OUT.work/ is what a failed run left.
    monkeypatch.setattr(score_module, "write_scored", killed)
    out2 = tmp_path / "s2.tsv"
    assert xm(*args, "-o", out2).exit_code != 0
    monkeypatch.undo()
    shard = sorted((tmp_path / "s2.tsv.work" / "tgt").rglob("emb-*.npy"))[0]
    shard.write_bytes(shard.read_bytes()[:-100])
    ok(xm(*args, "-o", out2))
    assert out2.read_bytes() == out.read_bytes()


def test_a_users_file_in_scores_work_folder_outlives_the_run(data_dir, tmp_path):
    """(was: OUT.work/ removed whole when the run finished, a user's file in a kept one with it)"""
    rows = _bitext(data_dir, 30, 10)
    tsv = tmp_path / "b.tsv"
    tsv.write_text("".join(f"{de}\t{en}\n" for de, en, _ in rows), encoding="utf-8")
    args = ("score", tsv, "--src-lang", "de", "--tgt-lang", "en", "-q", "-o", tmp_path / "s.tsv")
    ok(xm(*args, "--keep-work"))
    work = tmp_path / "s.tsv.work"
    assert (work / "sides" / "src.txt").is_file() and list(work.rglob("emb-*.npy"))
    (work / "sides" / "notes.txt").write_text("my notes")
    ok(xm(*args, "--overwrite"))
    assert {p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file()} == {
        "sides/notes.txt", ".xmine-output.json"}


def test_a_bitext_smaller_than_k_is_noted_and_corpora_give_its_pairs_their_neighbourhoods(data_dir, tmp_path, caplog):
    """A one-pair bitext's margin compares the pair with itself alone (ratio exactly 1), so mine's
    threshold drops even a true translation: the run says so (stderr, OUT.json, the summary line)
    and names the remedy, monolingual corpora for the neighbourhoods, which then keep the pair
    without the note. A bitext of k pairs and more gets no note."""
    de, en = flores_lines(data_dir, "deu_Latn", 60), flores_lines(data_dir, "eng_Latn", 60)
    one = tmp_path / "one.tsv"
    one.write_text(f"{de[5]}\t{en[5]}\n", encoding="utf-8")
    res = ok(xm("score", one, "--src-lang", "de", "--tgt-lang", "en", "-o", tmp_path / "a.tsv", "-q"))
    summary = json.loads((tmp_path / "a.tsv.json").read_text(encoding="utf-8"))
    assert summary["kept"] == 0 and summary["dropped"]["threshold"] == 1
    assert float((tmp_path / "a.tsv").read_text(encoding="utf-8").split("\t")[3]) == pytest.approx(1.0, abs=1e-5)
    note = summary["threshold"]["few_neighbours"]
    assert "holds 1 distinct sentence" in note and "fewer than k=4" in note and "--src-corpus" in note
    assert warned(caplog, note) and "too few sentences for k neighbours" in res.output.splitlines()[-1]

    (tmp_path / "de.txt").write_text("".join(f"{s}\n" for s in de[20:60]), encoding="utf-8")
    (tmp_path / "en.txt").write_text("".join(f"{s}\n" for s in en[20:60]), encoding="utf-8")
    res = ok(xm("score", one, "--src-lang", "de", "--tgt-lang", "en", "-o", tmp_path / "b.tsv", "-q",
                "--src-corpus", tmp_path / "de.txt", "--tgt-corpus", tmp_path / "en.txt"))
    summary = json.loads((tmp_path / "b.tsv.json").read_text(encoding="utf-8"))
    assert summary["kept"] == 1 and "few_neighbours" not in summary["threshold"]
    assert "too few sentences" not in res.output

    four = tmp_path / "four.tsv"
    four.write_text("".join(f"{de[i]}\t{en[i]}\n" for i in range(4)), encoding="utf-8")
    ok(xm("score", four, "--src-lang", "de", "--tgt-lang", "en", "-o", tmp_path / "c.tsv", "-q"))
    assert "few_neighbours" not in json.loads((tmp_path / "c.tsv.json").read_text(encoding="utf-8"))["threshold"]


def test_scores_warnings_and_record_name_the_users_bitext_and_its_lines(data_dir, tmp_path, caplog):
    """`score` embeds a staged copy of each side; what reading it finds is said of the user's
    file and its lines, and OUT.json records the user's bitext (its sha256, format, fields), not
    the staged copy (was: `OUT.work/sides/src.txt: ... (lines 3)`, and the staged file's hash)."""
    import csv
    import hashlib

    de, en = flores_lines(data_dir, "deu_Latn", 12), flores_lines(data_dir, "eng_Latn", 12)
    de[2] = " ".join([de[2]] * 40)  # longer than 2000 characters: cut for encoding
    en[5] = en[5].replace(" ", "\n", 1)  # a quoted line break inside a cell
    bitext = tmp_path / "pairs.csv"
    with open(bitext, "w", encoding="utf-8", newline="") as f:
        f.write("\n")  # a blank line before the header: the user's line numbers are not pair numbers
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["german", "english"])
        w.writerows(zip(de, en))
    first_line = {i: 3 + i + (i > 5) for i in range(12)}  # pair 5 spans two lines
    out = tmp_path / "scored.tsv"
    with caplog.at_level("WARNING", logger="xmine"):
        ok(xm("score", bitext, "--src-lang", "de", "--tgt-lang", "en", "--src-field", "german",
              "--tgt-field", "english", "-o", out, "-q"))
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert not any(".work" in m for m in said), said
    assert any(m.startswith(f"{bitext} (source side): 1 line(s) longer than 2000 characters")
               and m.endswith(f"(lines {first_line[2]})") for m in said), said
    assert f"{bitext} (target side): tabs or line-break characters inside 1 line(s) replaced by spaces" in said
    assert any(m.startswith(f"{bitext}: 1 pair(s) hold a tab or line break inside a field, written as a space "
                            f"in the TSV output (first at line {first_line[5]})") for m in said), said
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 13 and lines[1 + 5].split("\t")[1] == en[5].replace("\n", " ")

    # A Moses pair: each side's warning names that side's own file (was: the source file for both,
    # "a.de (target side)"); Python lists: the list and its 0-based item.
    import xmine

    en[5] = " ".join([en[5].replace("\n", " ")] * 40)
    (tmp_path / "a.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "a.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    caplog.clear()
    with caplog.at_level("WARNING", logger="xmine"):
        ok(xm("score", "--src", tmp_path / "a.de", "--tgt", tmp_path / "a.en", "--src-lang", "de", "--tgt-lang", "en",
              "-o", tmp_path / "moses.tsv", "-q"))
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert f"{tmp_path / 'a.de'}: 1 line(s) longer than 2000 characters are cut to that length for encoding " \
        "(lines 3)" in said, said
    assert f"{tmp_path / 'a.en'}: 1 line(s) longer than 2000 characters are cut to that length for encoding " \
        "(lines 6)" in said, said
    caplog.clear()
    with caplog.at_level("WARNING", logger="xmine"):
        xmine.score(de, en, src_lang="de", tgt_lang="en", show_progress=False)
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "tgt (the list given): 1 item(s) longer than 2000 characters are cut to that length for encoding " \
        "(items 5)" in said, said

    made = json.loads((tmp_path / "scored.tsv.json").read_text(encoding="utf-8"))["provenance"]["parameters"]
    assert made["bitext"] == {
        "files": [{"path": str(bitext), "size": bitext.stat().st_size,
                   "sha256": hashlib.sha256(bitext.read_bytes()).hexdigest()}],
        "format": "csv", "src_field": "german", "tgt_field": "english", "header": None, "split": None,
        "fields_read": ["1", "2"]}
    assert made["corpora"] == [None, None]


def _bitext_and_corpus_store(data_dir, tmp_path):
    """(6 German-English FLORES pairs as a TSV bitext, a store of 24 other English sentences)"""
    de, en = flores_lines(data_dir, "deu_Latn", 30), flores_lines(data_dir, "eng_Latn", 30)
    bitext = tmp_path / "pairs.tsv"
    bitext.write_text("".join(f"{a}\t{b}\n" for a, b in zip(de[:6], en[:6])), encoding="utf-8")
    (tmp_path / "en.txt").write_text("".join(f"{s}\n" for s in en[6:]), encoding="utf-8")
    store = tmp_path / "en.store"
    ok(xm("embed", tmp_path / "en.txt", "--lang", "en", "-o", store, "-q"))
    return bitext, store


def test_a_damaged_corpus_store_is_refused_before_the_output_is_claimed(data_dir, tmp_path):
    """(was: refused after the claim, leaving an unfinished OUT.json and OUT.work/ behind)"""
    from tests.clitools import untouched

    bitext, store = _bitext_and_corpus_store(data_dir, tmp_path)
    shard = next(p for p in sorted(store.iterdir()) if p.suffix == ".npy")
    shard.write_bytes(shard.read_bytes()[:-8])  # cut short
    with untouched(tmp_path):
        refused(xm("score", bitext, "--src-lang", "de", "--tgt-lang", "en", "-o", tmp_path / "scored.tsv", "-q",
                   "--tgt-corpus", store), str(shard.name))
        refused(xm("score", bitext, "--src-lang", "de", "--tgt-lang", "en", "-o", tmp_path / "scored.tsv", "-q",
                   "--src-corpus", tmp_path / "nowhere.txt"), "nowhere.txt")


def test_a_corpus_store_is_opened_once(data_dir, tmp_path, monkeypatch):
    """The store checked before the claim is the one scored with (was: opened, and its files up to
    64 MiB hashed, twice)."""
    from xmine.store import EmbeddingStore

    bitext, store = _bitext_and_corpus_store(data_dir, tmp_path)
    opened, real_open = [], EmbeddingStore.open.__func__

    def counting_open(cls, path, *args, **kwargs):
        opened.append(Path(path))
        return real_open(cls, path, *args, **kwargs)

    monkeypatch.setattr(EmbeddingStore, "open", classmethod(counting_open))
    ok(xm("score", bitext, "--src-lang", "de", "--tgt-lang", "en", "-o", tmp_path / "scored.tsv", "-q",
          "--tgt-corpus", store))
    assert opened.count(store) == 1, opened


def test_a_tsv_output_has_a_header_line_only_where_the_input_had_one(tmp_path):
    """(was: a Parquet or dataset input gave a TSV with a header line, a JSON Lines input one
    without: a pipeline reading the columns by number got one more row for some inputs)"""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pairs = [("Hallo Welt.", "Hello world."), ("Guten Morgen.", "Good morning."), ("Die Katze.", "The cat.")]
    pq.write_table(pa.table({"de": [d for d, _ in pairs], "en": [e for _, e in pairs]}), tmp_path / "p.parquet")
    (tmp_path / "p.jsonl").write_text("".join(json.dumps({"de": d, "en": e}) + "\n" for d, e in pairs),
                                      encoding="utf-8")
    (tmp_path / "p.tsv").write_text("".join(f"{d}\t{e}\n" for d, e in pairs), encoding="utf-8")
    for source in ("p.parquet", "p.jsonl", "p.tsv"):
        for fmt in ("tsv", "csv"):
            out = tmp_path / f"{source}.{fmt}"
            fields = [] if source == "p.tsv" else ["--src-field", "de", "--tgt-field", "en"]
            ok(xm("score", tmp_path / source, *fields, "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3",
                  "-o", out, "-q"))
            lines = out.read_text(encoding="utf-8").splitlines()
            if fmt == "tsv":
                assert len(lines) == 3 and lines[0].startswith("Hallo Welt.\tHello world.\t"), (source, lines)
            else:
                assert len(lines) == 4 and lines[0] == "src,tgt,cosine,margin,keep,rule", (source, lines)


def test_the_summary_line_says_where_the_threshold_came_from_once(tmp_path):
    """(was: the summary line repeated the log line's why-not-moved note, about 400 characters)"""
    tsv = tmp_path / "p.tsv"
    tsv.write_text("Hallo Welt.\tHello world.\nGuten Morgen.\tGood morning.\nDie Katze.\tThe cat.\n", encoding="utf-8")
    res = ok(xm("score", tsv, "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-o", tmp_path / "o.tsv",
                "-q"))
    source = json.loads((tmp_path / "o.tsv.json").read_text())["threshold"]["source"]
    assert "its single value: mine moves it" in source  # the record says it in full
    line = [line for line in res.output.splitlines() if line.startswith("kept ")][0]
    assert "its single value" not in line and "calibrated for raw use-m3" in line, line


def test_a_gz_output_is_gzip_compressed_and_other_compressions_are_refused(tmp_path):
    """(was: `-o scored.tsv.gz` wrote plain text under a .gz name)"""
    import gzip

    tsv = tmp_path / "p.tsv"
    tsv.write_text("Hallo Welt.\tHello world.\nGuten Morgen.\tGood morning.\nDie Katze.\tThe cat.\n", encoding="utf-8")
    plain = tmp_path / "o.tsv"
    args = ("--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-q")
    ok(xm("score", tsv, *args, "-o", plain))
    for name in ("o.tsv.gz", "o.csv.gz", "o.jsonl.gz"):
        ok(xm("score", tsv, *args, "-o", tmp_path / name))
        text = gzip.decompress((tmp_path / name).read_bytes()).decode("utf-8")
        assert len(text.splitlines()) == (4 if ".csv" in name else 3), (name, text)
        if name == "o.tsv.gz":
            assert text == plain.read_text(encoding="utf-8")
        ok(xm("verify", tmp_path / name))
    for name in ("o.tsv.xz", "o.jsonl.zst", "o.parquet.gz"):
        refused(xm("score", tsv, *args, "-o", tmp_path / name), f"{name}: score writes tsv, csv and jsonl gzip-compressed (a name ending in .gz)")
        assert not (tmp_path / name).exists()


def test_without_languages_the_language_rules_are_said_not_to_run(tmp_path, caplog):
    """(was: silent, and OUT.json listed `script` and `language` as active with languages [null, null])"""
    tsv = tmp_path / "p.tsv"
    tsv.write_text("Hallo Welt.\tHello world.\nGuten Morgen.\tGuten Abend.\nDie Katze.\tThe cat.\n", encoding="utf-8")
    res = ok(xm("score", tsv, "--encoder", "use-m3", "--threshold", "none", "-o", tmp_path / "o.tsv", "-q"))
    assert warned(caplog, f"{tsv}: no --src-lang or --tgt-lang given: the script and language filter(s) judge "
                          "nothing; give the languages to run them")
    summary = json.loads((tmp_path / "o.tsv.json").read_text())
    assert "language" not in summary["filters"]["active"] and "script" not in summary["filters"]["active"]
    assert "language" not in summary["dropped"] and "identical" in summary["filters"]["active"], res.output
    ok(xm("score", tsv, "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "--threshold", "none",
          "-o", tmp_path / "l.tsv", "-q"))
    summary = json.loads((tmp_path / "l.tsv.json").read_text())
    assert "language" in summary["filters"]["active"] and "script" in summary["filters"]["active"]
    # mine records its pair filters alike
    (tmp_path / "de.txt").write_text("Hallo Welt.\nGuten Morgen.\nDie Katze.\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("Hello world.\nGood morning.\nThe cat.\n", encoding="utf-8")
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--encoder", "use-m3", "--threshold", "none",
          "-o", tmp_path / "m.tsv", "-q"))
    filters = json.loads((tmp_path / "m.tsv.json").read_text())["filters"]
    assert {"language", "script"}.isdisjoint(filters["active"]) and "language" not in filters["removed"], filters


def test_a_scored_dataset_is_written_as_a_dataset(tmp_path):
    """`--format hf`: a dataset in, a dataset out, its `Translation` feature kept (was: no hf output;
    Parquet gave a plain struct)."""
    import datasets

    pairs = [("Hallo Welt.", "Hello world."), ("Guten Morgen.", "Good morning."), ("Die Katze schläft.", "The cat sleeps."),
             ("Es regnet heute.", "The train is late.")]
    features = datasets.Features({"id": datasets.Value("int64"),
                                  "translation": datasets.Translation(languages=["de", "en"])})
    datasets.Dataset.from_dict({"id": list(range(len(pairs))), "translation": [{"de": d, "en": e} for d, e in pairs]},
                               features=features).save_to_disk(str(tmp_path / "bt"))
    out = tmp_path / "scored"
    ok(xm("score", tmp_path / "bt", "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "--format", "hf",
          "-o", out, "-q"))
    ds = datasets.load_from_disk(str(out))
    assert ds.features["translation"] == datasets.Translation(languages=["de", "en"])
    assert ds["id"] == [0, 1, 2, 3] and ds["translation"][2] == {"de": "Die Katze schläft.", "en": "The cat sleeps."}
    assert set(ds.column_names) == {"id", "translation", "cosine", "margin", "keep", "rule"}
    assert "scored by `xmine score`" in (out / "README.md").read_text(encoding="utf-8")
    ok(xm("verify", out))
    # an existing dataset folder is written as one again without --format (with --overwrite)
    ok(xm("score", tmp_path / "bt", "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-o", out,
          "--overwrite", "--threshold", "0.99", "--margin", "distance", "--kept-only", "-q"))
    assert len(datasets.load_from_disk(str(out))) == 0  # none kept: an empty dataset that loads
    # another format replaces it as any earlier result, with --overwrite only, as mine's (was refused:
    # "its name says hf", of a name that says nothing)
    args = ("score", tmp_path / "bt", "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-o", out,
            "--format", "csv", "-q")
    refused(xm(*args), f"{out}: already exists", "pass --overwrite")
    ok(xm(*args, "--overwrite"))
    assert out.is_file() and out.read_text(encoding="utf-8").splitlines()[0] == "src,tgt,cosine,margin,keep,rule"
    # a folder that is no earlier result is never replaced, whatever the format and --overwrite
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine", encoding="utf-8")
    for fmt in ("csv", "hf"):
        refused(xm(*args[:8], "-o", theirs, "--format", fmt, "--overwrite", "-q"), str(theirs))
    assert [p.name for p in theirs.iterdir()] == ["notes.txt"] and not (tmp_path / "theirs.json").exists()


def test_blank_rows_are_kept_as_empty_pairs_and_translation_entries_must_match_the_languages(tmp_path):
    """(was: a row of two blank fields left out of the output, so it no longer matched the input
    row for row; later, a line with no field at all likewise, without a word; and a `translation`
    object read from its first two entries whatever the languages: German scored as "French")"""
    rows = ["", "Hallo Welt.\tHello world.", "\t", " \t ", "Guten Morgen.\tGood morning.", "", "\tThe cat."]
    tsv = tmp_path / "b.tsv"
    tsv.write_text("\n".join(rows) + "\n", encoding="utf-8")
    ok(xm("score", tsv, "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-o", tmp_path / "o.tsv", "-q"))
    out = (tmp_path / "o.tsv").read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[-1] == "empty" for line in out] == [True, False, True, True, False, True, True]
    assert [line.split("\t")[:2] for line in out][4] == ["Guten Morgen.", "Good morning."]  # row i is line i
    assert json.loads((tmp_path / "o.tsv.json").read_text())["pairs"] == 7
    csv_file = tmp_path / "b.csv"
    csv_file.write_text("\nde,en\nHallo Welt.,Hello world.\n,\n\nGuten Morgen.,Good morning.\n", encoding="utf-8")
    ok(xm("score", csv_file, "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-o", tmp_path / "c.csv",
          "-q"))
    out = (tmp_path / "c.csv").read_text(encoding="utf-8").splitlines()
    assert len(out) == 5 and out[0].startswith("de,en,") and [line.endswith("empty") for line in out[1:]] == \
        [False, True, True, False]

    empty = tmp_path / "e.tsv"  # every source empty (was: an error naming OUT.work/sides/src.txt)
    empty.write_text("\tHello.\n \tGood.\n", encoding="utf-8")
    refused(xm("score", empty, "--encoder", "use-m3", "-o", tmp_path / "e-out.tsv"),
            str(empty), "no pair has a source text (2 pair(s), every source empty)")
    assert not (tmp_path / "e-out.tsv.json").exists()

    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text("".join(json.dumps({"translation": {"en": e, "de": d}}) + "\n"
                             for d, e in (("Hallo.", "Hello."), ("Gut.", "Good."))), encoding="utf-8")
    refused(xm("score", jsonl, "--src-lang", "fr", "--tgt-lang", "en", "--encoder", "use-m3", "-o", tmp_path / "f.tsv"),
            "hold no entries for fr and en (entries: en, de)", "--src-field translation.KEY")
    ok(xm("score", jsonl, "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-o", tmp_path / "d.jsonl",
          "-q"))
    made = json.loads((tmp_path / "d.jsonl.json").read_text())["provenance"]["parameters"]["bitext"]
    assert made["fields_read"] == ["translation.de", "translation.en"]
    # three languages and none named: which two to score (a helper: was "no field 'src' (fields: translation)")
    three = tmp_path / "three.jsonl"
    three.write_text("".join(json.dumps({"translation": {"de": d, "en": e, "fr": f}}) + "\n"
                             for d, e, f in (("Hallo.", "Hello.", "Bonjour."), ("Gut.", "Good.", "Bien."))),
                     encoding="utf-8")
    refused(xm("score", three, "--encoder", "use-m3", "-o", tmp_path / "3.tsv"),
            f"{three}: its `translation` objects hold 3 languages (de, en, fr); say which two with --src-lang and "
            "--tgt-lang")


def test_a_mining_result_in_every_format_is_judged_in_the_languages_it_was_mined_in(data_dir, tmp_path, caplog):
    """(a helper: `score m.jsonl` of mine's output warned that the script and language filters judge
    nothing without --src-lang and --tgt-lang, though its OUT.json records them)"""
    de, en = flores_lines(data_dir, "deu_Latn", 12), flores_lines(data_dir, "eng_Latn", 12)
    (tmp_path / "de.txt").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    for fmt in ("tsv", "jsonl", "parquet"):
        ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "--encoder",
              "use-m3", "-q", "-o", tmp_path / f"m.{fmt}"))
        caplog.clear()
        ok(xm("score", tmp_path / f"m.{fmt}", "--encoder", "use-m3", "-q", "-o", tmp_path / f"s.{fmt}"))
        assert json.loads((tmp_path / f"s.{fmt}.json").read_text())["filters"]["languages"] == ["de", "en"], fmt
        assert "judge nothing" not in caplog.text, fmt
    # its Moses pair OUT.de, OUT.en too (a helper: a Moses pair was never read as mine's), in mine's order only
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "--encoder",
          "use-m3", "--format", "moses", "-q", "-o", tmp_path / "mm"))
    caplog.clear()
    ok(xm("score", f"{tmp_path / 'mm.de'}:{tmp_path / 'mm.en'}", "--encoder", "use-m3", "-q", "-o", tmp_path / "sm.tsv"))
    assert json.loads((tmp_path / "sm.tsv.json").read_text())["filters"]["languages"] == ["de", "en"]
    assert "judge nothing" not in caplog.text
    ok(xm("score", f"{tmp_path / 'mm.en'}:{tmp_path / 'mm.de'}", "--encoder", "use-m3", "-q", "-o", tmp_path / "sr.tsv"))
    assert json.loads((tmp_path / "sr.tsv.json").read_text())["filters"]["languages"] == [None, None]  # not swapped
    ok(xm("score", tmp_path / "m.tsv", "--encoder", "use-m3", "--src-lang", "fr", "--tgt-lang", "en", "-q",
          "-o", tmp_path / "g.tsv"))  # the languages given win
    # a mining result of no pair: said so (was: "file is empty", as if the file were the user's mistake)
    for fmt in ("tsv", "jsonl"):
        ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "--encoder",
              "use-m3", "--threshold", "10", "-q", "-o", tmp_path / f"none.{fmt}"))
        refused(xm("score", tmp_path / f"none.{fmt}", "--encoder", "use-m3", "-q", "-o", tmp_path / f"sn.{fmt}"),
                f"none.{fmt}: holds no pair: the `xmine mine` run that wrote it kept none")
    assert json.loads((tmp_path / "g.tsv.json").read_text())["filters"]["languages"] == ["fr", "en"]


def test_a_mined_tsv_is_scored_by_its_sentences_and_a_score_column_is_never_a_side(data_dir, tmp_path):
    """(was: `score m.tsv` of mine's own TSV read its score column as the source: "kept 0 of 30 pairs",
    exit 0.) Its OUT.json names it a mining result, so its sentences are columns 2 and 3; the same
    score<TAB>src<TAB>tgt without it (LASER's and stopes' layout) is refused, naming the options."""
    de, en = flores_lines(data_dir, "deu_Latn", 30), flores_lines(data_dir, "eng_Latn", 30)
    (tmp_path / "de.txt").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en[::-1]) + "\n", encoding="utf-8")
    common = ("--src-lang", "de", "--tgt-lang", "en", "-q")
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", *common, "--line-numbers", "-o", tmp_path / "m.tsv"))
    mined = [line.split("\t") for line in (tmp_path / "m.tsv").read_text(encoding="utf-8").splitlines()]
    ok(xm("score", tmp_path / "m.tsv", *common, "-o", tmp_path / "s.tsv"))
    scored = [line.split("\t") for line in (tmp_path / "s.tsv").read_text(encoding="utf-8").splitlines()]
    assert len(scored) == len(mined) >= 28 and all(row[-2] == "1" for row in scored), scored[:3]
    assert all(abs(float(s[6]) - float(m[0])) < 1e-3 for s, m in zip(scored, mined))  # mine's margins
    assert "mined_in_another_space" not in json.loads((tmp_path / "s.tsv.json").read_text())
    # Scored in another space than it was mined in: said, with the options of the mining's space
    # (was: silence, the margins and threshold of raw embeddings).
    ok(xm("score", tmp_path / "m.tsv", *common, "--projection", "none", "-o", tmp_path / "raw.tsv"))
    note = json.loads((tmp_path / "raw.tsv.json").read_text())["mined_in_another_space"]
    assert "m.tsv was mined with encoder 'me5-small' and projection" in note, note
    assert "no projection (raw embeddings)" in note and "--encoder me5-small --projection default" in note, note
    # mined at another precision and runtime: said with the options (was: unsaid, margins 3e-4 apart);
    # given them, scored as mined, to 1e-5 (docs/inputs-outputs.md)
    fp32 = ("--precision", "fp32", "--runtime", "torch")
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", *common, *fp32, "--no-lang-filter", "--no-pre-clean",
          "-o", tmp_path / "m32.tsv"))
    ok(xm("score", tmp_path / "m32.tsv", *common, "-o", tmp_path / "s16.tsv"))
    note = json.loads((tmp_path / "s16.tsv.json").read_text())["mined_in_another_space"]
    assert "m32.tsv was mined at precision fp32 and runtime torch, but is scored at precision " in note, note
    assert note.endswith("give --precision fp32 --runtime torch to score it as it was mined"), note
    ok(xm("score", tmp_path / "m32.tsv", *common, *fp32, "-o", tmp_path / "s32.tsv"))
    assert "mined_in_another_space" not in json.loads((tmp_path / "s32.tsv.json").read_text())
    mined32 = [line.split("\t") for line in (tmp_path / "m32.tsv").read_text(encoding="utf-8").splitlines()]
    scored32 = [line.split("\t") for line in (tmp_path / "s32.tsv").read_text(encoding="utf-8").splitlines()]
    assert len(mined32) == len(scored32) >= 28
    assert max(abs(float(s[4]) - float(m[0])) for s, m in zip(scored32, mined32)) <= 1e-5
    (tmp_path / "laser.tsv").write_bytes((tmp_path / "m.tsv").read_bytes())  # (no OUT.json beside it)
    refused(xm("score", tmp_path / "laser.tsv", *common, "-o", tmp_path / "l.tsv"), "laser.tsv",
            "every source text is a number (column or field 1: a score?)", "--src-field and --tgt-field")
    assert not (tmp_path / "l.tsv").exists()
    (tmp_path / "m.tmx").write_text("<tmx version='1.4'><body></body></tmx>\n", encoding="utf-8")
    refused(xm("score", tmp_path / "m.tmx", *common, "-o", tmp_path / "t.tsv"), "m.tmx", "TMX is not a format")


def test_binary_outputs_hold_the_scores_the_threshold_compares(data_dir, tmp_path):
    """Parquet (and hf, the API) hold each score's float32 value, TSV and JSON Lines 6 decimals;
    a --threshold of a Parquet margin keeps that pair (a helper: every output rounded, and a
    threshold of a written margin dropped the pair it was read from)."""
    import numpy as np
    import pyarrow.parquet as pq

    rows = _bitext(data_dir, 6, 4)
    tsv = tmp_path / "b.tsv"
    tsv.write_text("".join(f"{de}\t{en}\n" for de, en, _ in rows), encoding="utf-8")
    common = ("--src-lang", "de", "--tgt-lang", "en", "--threshold", "none", "--no-filters", "-q")
    ok(xm("score", tsv, *common, "-o", tmp_path / "s.parquet"))
    ok(xm("score", tsv, *common, "-o", tmp_path / "s.tsv"))
    exact = [r["margin"] for r in pq.read_table(tmp_path / "s.parquet").to_pylist()]
    written = [float(line.split("\t")[3]) for line in (tmp_path / "s.tsv").read_text(encoding="utf-8").splitlines()]
    assert all(float(np.float32(m)) == m for m in exact)  # float32 values, not rounded
    assert any(round(m, 6) != m for m in exact) and [round(m, 6) for m in exact] == written
    best = max(exact)
    ok(xm("score", tsv, *common[:4], "--threshold", repr(best), "--no-filters", "-q", "-o", tmp_path / "t.parquet"))
    kept = [r["margin"] for r in pq.read_table(tmp_path / "t.parquet").to_pylist() if r["keep"]]
    assert kept == [best]


def test_k_1_with_a_margin_is_refused_with_corpora_too(data_dir, tmp_path):
    """With --src-corpus and --tgt-corpus the pairs' partners are a pair's one neighbour where the
    bitext was mined from them (a helper: taken, every margin 1.000000, 117 of 117 dropped, exit 0);
    under --threshold none the refusal does not say "nothing is kept" (was: it did)."""
    bitext, store = _bitext_and_corpus_store(data_dir, tmp_path)
    de = flores_lines(data_dir, "deu_Latn", 30)[6:]
    (tmp_path / "de.txt").write_text("".join(f"{s}\n" for s in de), encoding="utf-8")
    base = ("score", bitext, "--src-lang", "de", "--tgt-lang", "en", "-k", "1", "-q")
    said = refused(xm(*base, "--threshold", "none", "-o", tmp_path / "a.tsv"), "-k 1 with the ratio margin")
    assert "nothing is kept" not in said
    assert "nothing is kept" in refused(xm(*base, "-o", tmp_path / "a.tsv"), "-k 1 with the ratio margin")
    refused(xm(*base, "--src-corpus", tmp_path / "de.txt", "--tgt-corpus", store, "-o", tmp_path / "b.tsv"),
            "-k 1 with the ratio margin")


def test_a_scored_bitext_scored_again_and_a_corpus_of_another_encoder_are_refused_before_any_work(data_dir,
                                                                                                  tmp_path):
    """(a helper: a CSV scored again was written with the score columns twice, a reader taking the
    old `keep`; JSON Lines, Parquet and datasets refused only after both sides were encoded, leaving
    OUT.json and OUT.work/; a --tgt-corpus store of another encoder refused after the bitext was
    encoded, the same left behind)"""
    from tests.clitools import untouched

    bitext, _ = _bitext_and_corpus_store(data_dir, tmp_path)
    store = tmp_path / "use.store"
    ok(xm("embed", tmp_path / "en.txt", "--lang", "en", "--encoder", "use-m3", "-o", store, "-q"))
    common = ["--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-q"]
    with untouched(tmp_path):
        refused(xm("score", bitext, *common[:-3], "--encoder", "me5-small", "-q", "-o", tmp_path / "s.tsv",
                   "--tgt-corpus", store), f"embedding store {store} was made with encoder 'use-m3'")
    ok(xm("score", bitext, *common, "-o", tmp_path / "s.csv"))
    ok(xm("score", bitext, *common, "-o", tmp_path / "s.jsonl"))
    for scored, fields in (("s.csv", ["src", "tgt"]), ("s.jsonl", ["src", "tgt"])):
        for out in ("again.csv", "again.jsonl", "again.parquet"):
            with untouched(tmp_path):
                refused(xm("score", tmp_path / scored, "--src-field", fields[0], "--tgt-field", fields[1], *common,
                           "-o", tmp_path / out, "--operating-point", "precision"),
                        f"{tmp_path / scored}: is the output of an xmine score (says {scored}.json)")
    # its summary away, by its columns (its first record, for JSON Lines)
    for scored in ("s.csv", "s.jsonl"):
        (tmp_path / f"{scored}.json").unlink()
        refused(xm("score", tmp_path / scored, "--src-field", "src", "--tgt-field", "tgt", *common, "-o",
                   tmp_path / "again.parquet"), str(tmp_path / scored), "already has a field 'cosine', which the "
                "scores would replace")


def test_a_csv_or_tsv_output_keeps_its_header_line_when_no_pair_is_kept(tmp_path):
    """(a helper: --kept-only keeping nothing wrote an empty CSV, though CSV is "always with a header
    line", and a TSV input's header line was lost)"""
    pairs = [("Hallo Welt.", "Hello world."), ("Guten Morgen.", "Good morning.")]
    (tmp_path / "p.tsv").write_text("id\tde\ten\n" + "".join(f"{i}\t{d}\t{e}\n" for i, (d, e) in enumerate(pairs)),
                                    encoding="utf-8")
    for fmt in ("tsv", "csv"):
        out = tmp_path / f"none.{fmt}"
        ok(xm("score", tmp_path / "p.tsv", "--header", "--src-field", "de", "--tgt-field", "en", "--src-lang", "de",
              "--tgt-lang", "en", "--encoder", "use-m3", "--kept-only", "--margin", "ratio", "--threshold", "9",
              "-o", out, "-q"))
        sep = "\t" if fmt == "tsv" else ","
        assert out.read_text(encoding="utf-8").splitlines() == [sep.join(["id", "de", "en", "cosine", "margin", "keep",
                                                                          "rule"])]


def test_line_break_characters_inside_a_tsv_or_moses_line_are_said_to_be_replaced(tmp_path, caplog):
    """(a helper: U+2028, a form feed or a tab inside a TSV or Moses line became a space without a
    word, where a CSV input's are warned about)"""
    (tmp_path / "b.tsv").write_text("Hallo\u2028Welt\tHello world\nGuten\x0cMorgen\tGood morning\nJa\tYes\n",
                                    encoding="utf-8")
    (tmp_path / "b.de").write_text("Hallo\u2028Welt\nGuten\tMorgen\nJa\n", encoding="utf-8")
    (tmp_path / "b.en").write_text("Hello world\nGood morning\nYes\n", encoding="utf-8")
    for bitext, said in ((tmp_path / "b.tsv", f"{tmp_path / 'b.tsv'}: line-break characters inside 2 line(s)"),
                         (f"{tmp_path / 'b.de'}:{tmp_path / 'b.en'}",
                          f"{tmp_path / 'b.de'}: line-break characters or tabs inside 2 line(s)")):
        caplog.clear()
        with caplog.at_level("WARNING", logger="xmine"):
            ok(xm("score", bitext, "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-o",
                  tmp_path / "o.tsv", "-q", "--overwrite"))
        assert warned(caplog, said + " replaced by spaces, as xmine reads every text file (and writes them so)")
        assert not any(f"{tmp_path / 'b.en'}: line-break" in r.getMessage() for r in caplog.records)
        assert (tmp_path / "o.tsv").read_text(encoding="utf-8").splitlines()[0].startswith("Hallo Welt\tHello world\t")


def test_a_headerless_tsv_scored_before_is_refused_and_a_csv_names_every_column_of_a_headerless_input(tmp_path):
    """(a regression pass: a TSV without a header line scored again was written with its score
    columns twice, and a CSV output of a headerless input of three columns had a header of two, each
    score read under the name of the one before it; a column named "²" was a traceback)"""
    pairs = [("Hallo Welt.", "Hello world.", "7"), ("Guten Morgen.", "Good morning.", "8"), ("Ja.", "Yes.", "9")]
    (tmp_path / "three.tsv").write_text("".join("\t".join(p) + "\n" for p in pairs), encoding="utf-8")
    common = ["--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-q"]
    ok(xm("score", tmp_path / "three.tsv", *common, "-o", tmp_path / "s.tsv"))
    refused(xm("score", tmp_path / "s.tsv", *common, "-o", tmp_path / "again.tsv"),
            f"{tmp_path / 's.tsv'}: is the output of an xmine score (says s.tsv.json)")
    ok(xm("score", tmp_path / "three.tsv", *common, "--src-field", 2, "--tgt-field", 1, "--threshold", "none",
          "-o", tmp_path / "s.csv"))
    import csv

    rows = list(csv.DictReader((tmp_path / "s.csv").open(encoding="utf-8")))
    assert [(r["tgt"], r["src"], r["column_3"]) for r in rows] == pairs, rows
    assert all(r["keep"] in ("0", "1") and 0 < float(r["cosine"]) <= 1 for r in rows), rows
    refused(xm("score", tmp_path / "three.tsv", *common, "--src-field", "²", "-o", tmp_path / "z.tsv"),
            "--src-field '²': without a header line a column is named by its 1-based number")


def test_a_bitext_changed_while_it_is_scored_writes_no_output(data_dir, tmp_path, monkeypatch):
    """Two rows swapped after the sides were staged (same size, same count): the rows written beside
    the scores would be other rows than those scored; refused at the end, no output finished (was:
    caught only where the bitext had grown)."""
    import xmine.mining.score as score_module

    rows = _bitext(data_dir, 20, 10)
    tsv = tmp_path / "b.tsv"
    tsv.write_text("".join(f"{de}\t{en}\n" for de, en, _ in rows), encoding="utf-8")
    real = score_module.score_pairs

    def swapped_meanwhile(*a, **k):
        lines = tsv.read_text(encoding="utf-8").splitlines(keepends=True)
        tsv.write_text("".join([lines[1], lines[0]] + lines[2:]), encoding="utf-8")
        return real(*a, **k)

    monkeypatch.setattr(score_module, "score_pairs", swapped_meanwhile)
    out = tmp_path / "s.tsv"
    refused(xm("score", tsv, "--src-lang", "de", "--tgt-lang", "en", "-q", "-o", out),
            f"{tsv}: changed while it was scored")
    # what was written is an unfinished output (as after any failure once writing began): refused by
    # verify, replaced by the next run without --overwrite
    assert json.loads((tmp_path / "s.tsv.json").read_text())["state"] == "unfinished"
    refused(xm("verify", out), "unfinished")
    monkeypatch.undo()
    ok(xm("score", tsv, "--src-lang", "de", "--tgt-lang", "en", "-q", "-o", out))
    ok(xm("verify", out))


def test_a_corpus_index_of_pq_codes_is_refused_before_anything_is_written(tmp_path):
    """(a helper: its decoded vectors were used, margins 0.001-0.002 off, OUT.json saying "exact")
    build-index refuses such an index as its source, score as a corpus: give the store."""
    import numpy as np

    rng = np.random.default_rng(0)
    (tmp_path / "c.txt").write_text("".join(f"Satz Nummer {i}.\n" for i in range(300)), encoding="utf-8")
    np.save(tmp_path / "c.npy", rng.standard_normal((300, 16)).astype(np.float32))
    ok(xm("embed", tmp_path / "c.txt", "--embeddings", tmp_path / "c.npy", "--encoder-name", "mine16", "--lang", "de",
          "-q", "-o", tmp_path / "c.store"))
    ok(xm("build-index", tmp_path / "c.store", "--index-type", "ivfpq", "--nlist", "2", "--pq-m", "4", "-q",
          "-o", tmp_path / "c.index"))
    (tmp_path / "b.tsv").write_text("Hallo Welt.\tHello world.\n", encoding="utf-8")
    refused(xm("score", tmp_path / "b.tsv", "--src-corpus", tmp_path / "c.index", "-q", "-o", tmp_path / "s.tsv"),
            "c.index: an index of PQ codes (IVF2,PQ4), which decode only approximately",
            "give the embedding store or text it was built from")
    assert not (tmp_path / "s.tsv").exists() and not (tmp_path / "s.tsv.json").exists()
    # a Moses pair of two indexes, or with a side not named (a helper: "is an index, but the other side is
    # an index"; an empty side read as ".", "is a directory, but no embedding store")
    refused(xm("score", "--src", tmp_path / "c.index", "--tgt", tmp_path / "c.index", "-o", tmp_path / "s.tsv"),
            "c.index: is an index, as is the other side: a Moses bitext is two line-aligned text files")
    for pair, empty in ((f"{tmp_path / 'c.txt'}:", "target"), (f":{tmp_path / 'c.txt'}", "source")):
        refused(xm("score", pair, "-o", tmp_path / "s.tsv"), f"{pair}: a Moses pair SRC_FILE:TGT_FILE names both "
                                                              f"files; its {empty} is empty")
