"""What the console says once: the runtime notices (the precision --precision auto chose, a
projection applied to another runtime's embeddings) are news once per machine (a marker under
$XMINE_HOME/notices, xmine.encoders.base.note_once), not on every run; transformers' warning
about a loss an encoder never uses is not printed when a model is built."""

from __future__ import annotations

import logging

import pytest

from tests.clitools import ok, xm
from tests.flores import flores_lines
from xmine.encoders import base


def _given(caplog, fragment: str) -> list[int]:
    """The levels of the log records holding `fragment`."""
    return [r.levelno for r in caplog.records if fragment in r.getMessage()]


def test_a_per_machine_notice_is_given_once_and_again_when_it_changes(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("XMINE_HOME", str(tmp_path / "home"))
    with caplog.at_level(logging.DEBUG, logger="xmine.encoders"):
        for _ in range(2):  # two runs: the per-process memory is forgotten between them
            base._NOTICED.discard(("test-notice",))
            base.note_once(("test-notice",), "%s runs at %s", "enc", "bf16", per_machine=True)
        base._NOTICED.discard(("test-notice",))
        base.note_once(("test-notice",), "%s runs at %s", "enc", "fp32", per_machine=True)  # news
    assert _given(caplog, "enc runs at bf16") == [logging.INFO, logging.DEBUG]
    assert _given(caplog, "enc runs at fp32") == [logging.INFO]
    assert len(list((tmp_path / "home" / base.NOTICES_DIR).iterdir())) == 2
    base._NOTICED.discard(("test-notice",))


@pytest.mark.slow
def test_mine_gives_the_runtime_notice_on_its_first_run_only(data_dir, tmp_path, caplog, monkeypatch):
    (tmp_path / "de.txt").write_text("\n".join(flores_lines(data_dir, "deu_Latn", 20)) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(flores_lines(data_dir, "eng_Latn", 20)) + "\n", encoding="utf-8")
    # A machine that has seen no notice yet: the markers go to a folder of this test's (an absolute
    # path joined to $XMINE_HOME is itself), never the machine's own, which other runs share.
    monkeypatch.setattr(base, "NOTICES_DIR", str(tmp_path / "notices"))
    levels = []
    for run in range(2):
        base._NOTICED.clear()  # a new process
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="xmine"):
            ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "-q",
                  "-o", tmp_path / f"m{run}.tsv"))
        levels.append(_given(caplog, "(--precision auto"))
    assert levels == [[logging.INFO], [logging.DEBUG]], levels


@pytest.mark.slow
def test_building_a_runtime_model_prints_no_transformers_loss_warning(capfd):
    """The OpenVINO build traces the torch model (xmine.encoders.ov_build.convert); transformers'
    `loss_type=None` warning, about training, stays out of the console."""
    pytest.importorskip("openvino")
    from transformers.utils import logging as hf_logging

    from xmine.encoders import load_encoder
    from xmine.encoders.ov_build import convert

    torch_fp32 = load_encoder("me5-small", device="cpu", precision="fp32", runtime="torch")
    hf_logging.get_logger("transformers.modeling_utils").warning_once.cache_clear()  # as in a new process
    capfd.readouterr()
    convert(torch_fp32)
    err = capfd.readouterr().err
    assert "loss_type" not in err, err
