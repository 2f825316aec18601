"""fsspec URLs as corpus inputs of `xmine mine` and `xmine embed` (xmine/io/stdin.py): the file is
copied once as it streams and mined exactly as the local file; OUT.json and the store's manifest
record the URL and the content's sha256, not the local copy; an unknown protocol or a missing
file is one error line. The `memory://` filesystem is fsspec's in-process one (no network here),
so the commands run in-process (click's CliRunner)."""

from __future__ import annotations

import gzip
import hashlib
import json

import fsspec
import pytest

from tests.clitools import ok, refused, xm
from tests.flores import flores_lines


@pytest.fixture
def corpora(data_dir, tmp_path):
    """30 German and 30 English FLORES lines (the English reversed), local and at memory:// URLs
    (the English gzip-compressed, its format still told by its name)."""
    de = "\n".join(flores_lines(data_dir, "deu_Latn", 30)) + "\n"
    en = "\n".join(flores_lines(data_dir, "eng_Latn", 30)[::-1]) + "\n"
    (tmp_path / "de.txt").write_text(de, encoding="utf-8")
    (tmp_path / "en.txt.gz").write_bytes(gzip.compress(en.encode(), mtime=0))
    fs = fsspec.filesystem("memory")
    root = f"xmine-test-{tmp_path.name}"
    fs.pipe(f"/{root}/de.txt", de.encode())
    fs.pipe(f"/{root}/en.txt.gz", (tmp_path / "en.txt.gz").read_bytes())
    yield {"de": f"memory://{root}/de.txt", "en": f"memory://{root}/en.txt.gz", "root": root,
           "de_sha256": hashlib.sha256(de.encode()).hexdigest()}
    fs.rm(f"/{root}", recursive=True)


@pytest.mark.slow
def test_mine_reads_urls_as_it_reads_the_files_and_records_the_urls(corpora, tmp_path):
    args = ("--src-lang", "de", "--tgt-lang", "en", "-q")
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt.gz", *args, "-o", tmp_path / "local.tsv"))
    ok(xm("mine", corpora["de"], corpora["en"], *args, "-o", tmp_path / "remote.tsv"))
    local = (tmp_path / "local.tsv").read_bytes()
    assert local.count(b"\n") >= 28 and (tmp_path / "remote.tsv").read_bytes() == local
    summary = json.loads((tmp_path / "remote.tsv.json").read_text())
    assert (summary["src"]["path"], summary["tgt"]["path"]) == (corpora["de"], corpora["en"])
    assert str(tmp_path) not in json.dumps(summary["src"]) and "xmine-url-" not in json.dumps(summary)
    # the Python API takes the URLs too, and gives the command's pairs
    import xmine

    table = xmine.mine(corpora["de"], corpora["en"], src_lang="de", tgt_lang="en")
    assert [f"{s:.6f}" for s in table.column("score").to_pylist()] == \
        [line.split(b"\t")[0].decode() for line in local.splitlines()]
    # a file:// URL is a URL too
    ok(xm("mine", (tmp_path / "de.txt").as_uri(), corpora["en"], *args, "-o", tmp_path / "file.tsv"))
    assert (tmp_path / "file.tsv").read_bytes() == local
    assert json.loads((tmp_path / "file.tsv.json").read_text())["src"]["path"] == (tmp_path / "de.txt").as_uri()


def test_embed_records_the_url_and_the_sha256_read(corpora, tmp_path):
    ok(xm("embed", corpora["de"], "--lang", "de", "-o", tmp_path / "de.store"))
    recorded = json.loads((tmp_path / "de.store" / "manifest.json").read_text())["input"]
    assert recorded["path"] == corpora["de"] and recorded["sha256"] == corpora["de_sha256"]
    ok(xm("embed", tmp_path / "de.txt", "--lang", "de", "-o", tmp_path / "local.store"))
    assert (tmp_path / "de.store" / "emb-00000.npy").read_bytes() == \
        (tmp_path / "local.store" / "emb-00000.npy").read_bytes()


@pytest.mark.parametrize("command", ["mine", "embed"])
def test_an_unknown_protocol_or_a_missing_file_is_one_line(corpora, tmp_path, command):
    def run(url):
        extra = (corpora["en"], "--src-lang", "de", "--tgt-lang", "en") if command == "mine" else ("--lang", "de")
        return xm(command, url, *extra, "-q", "-o", tmp_path / "out")

    refused(run("nosuchproto://bucket/de.txt"), "nosuchproto://bucket/de.txt", "unknown protocol 'nosuchproto'")
    missing = f"memory://{corpora['root']}/missing.txt"
    refused(run(missing), missing, "no such file")
    refused(run(f"memory://{corpora['root']}"), "a folder")
    assert list(tmp_path.iterdir()) == [tmp_path / "de.txt", tmp_path / "en.txt.gz"]


@pytest.mark.slow
def test_score_reads_a_bitext_at_a_url(corpora, data_dir, tmp_path):
    de, en = flores_lines(data_dir, "deu_Latn", 20), flores_lines(data_dir, "eng_Latn", 20)
    tsv = "".join(f"{d}\t{e}\n" for d, e in zip(de, en[:10] + en[11:] + en[10:11]))
    (tmp_path / "b.tsv").write_text(tsv, encoding="utf-8")
    url = f"memory://{corpora['root']}/b.tsv"
    fsspec.filesystem("memory").pipe(url.removeprefix("memory://"), tsv.encode())
    args = ("--src-lang", "de", "--tgt-lang", "en", "-q")
    ok(xm("score", tmp_path / "b.tsv", *args, "-o", tmp_path / "local.tsv"))
    ok(xm("score", url, *args, "-o", tmp_path / "remote.tsv"))
    assert (tmp_path / "remote.tsv").read_bytes() == (tmp_path / "local.tsv").read_bytes()
    bitext = json.loads((tmp_path / "remote.tsv.json").read_text())["provenance"]["parameters"]["bitext"]
    assert bitext["files"] == [{"path": url, "size": len(tsv.encode()), "sha256": hashlib.sha256(tsv.encode()).hexdigest()}]
    refused(xm("score", "nosuchproto://b.tsv", *args, "-o", tmp_path / "x.tsv"), "unknown protocol")


@pytest.fixture
def http_server(tmp_path):
    """A local HTTP server (a thread of this process) serving /de.txt whole and /cut.txt cut short:
    its Content-Length says the whole file, the connection closes after a third of it."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            data = (tmp_path / "de.txt").read_bytes()
            if self.path not in ("/de.txt", "/cut.txt"):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data if self.path == "/de.txt" else data[: len(data) // 3])
            self.wfile.flush()
            self.close_connection = True

        def do_HEAD(self):  # noqa: N802
            data = (tmp_path / "de.txt").read_bytes()
            self.send_response(200 if self.path in ("/de.txt", "/cut.txt") else 404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()

        def log_message(self, *args):  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_an_http_url_is_read_and_one_cut_short_is_one_line(corpora, http_server, tmp_path):
    """http(s):// works as installed (aiohttp is a dependency: was "needs a package that is not
    installed"), and a download cut short is one error line naming the URL (was: a traceback of
    aiohttp's ClientPayloadError, exit 1)."""
    base = http_server
    ok(xm("embed", f"{base}/de.txt", "--lang", "de", "-q", "-o", tmp_path / "http.store"))
    ok(xm("embed", tmp_path / "de.txt", "--lang", "de", "-q", "-o", tmp_path / "local.store"))
    assert (tmp_path / "http.store" / "emb-00000.npy").read_bytes() == \
        (tmp_path / "local.store" / "emb-00000.npy").read_bytes()
    assert json.loads((tmp_path / "http.store" / "manifest.json").read_text())["input"]["path"] == f"{base}/de.txt"
    error = refused(xm("embed", f"{base}/cut.txt", "--lang", "de", "-q", "-o", tmp_path / "cut.store"),
                    f"{base}/cut.txt", "unreadable")
    assert "\n" not in error and not (tmp_path / "cut.store").exists()
    refused(xm("embed", f"{base}/none.txt", "--lang", "de", "-q", "-o", tmp_path / "none.store"), "no such file")
