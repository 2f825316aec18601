"""`xmine calibrate`: the command of `xmine.mining.calibrate`."""

from __future__ import annotations

from pathlib import Path

import click

from xmine.artefacts.fileio import atomic_write_json
from xmine.artefacts.outputs import claim_output
from xmine.encoders import DEFAULT_ENCODER
from xmine.mining.calibrate import CALIBRATION_KIND, calibrate, flores_file, read_aligned
from xmine.mining.cli_options import k_option, src_lang_option, tgt_lang_option
from xmine.options import projection_option
from xmine.paths import resolve_data_dir


@click.command("calibrate")
@click.option("--encoder", default=None, help="Encoder of the space to calibrate (default: me5-small).")
@projection_option("of the space to calibrate")
@src_lang_option(required=True, help="Source language: a FLORES-200 code (deu_Latn) or ISO 639-1/3.")
@tgt_lang_option(required=True, help="Target language.")
@click.option("--gold", nargs=2, type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              metavar="SRC TGT", help="Your own line-aligned translations (>= 500 pairs) instead of FLORES-200.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder of the data sets (holding parallel/flores200/devtest); default: $XMINE_DATA or "
                   "../shared/data beside the checkout.")
@k_option(help="Neighbours of the margin, as mine's -k.")
@click.option("-o", "--out", required=True, type=click.Path(path_type=Path),
              help="Calibration record to write (JSON); `xmine mine --calibration OUT` uses it.")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it is an earlier calibration record.")
def calibrate_command(encoder, projection, src_lang, tgt_lang, gold, data_dir, k, out, overwrite):
    """Measure the mining thresholds (balanced and precision-first, per margin) and the score cap of
    a space xmine has no calibration for: an encoder you bring, or a projection you trained.

    Translations are hidden among distractors (a fifth of the pairs are the gold; FLORES-200
    devtest for the language pair, or --gold), mined exactly, and the thresholds read off the
    precision and recall of what was mined. Pass the record to `xmine mine --calibration`."""
    encoder = encoder or DEFAULT_ENCODER
    if gold is not None:
        inputs, data = list(gold), {"source": "gold pairs", "files": [str(p) for p in gold]}
    else:
        flores = resolve_data_dir(data_dir, needs="parallel/flores200/devtest",
                                  how_to_get="FLORES-200 (facebook/flores, flores200_dataset/devtest)")
        inputs = [flores_file(flores, lang) for lang in (src_lang, tgt_lang)]
        data = {"source": "FLORES-200 devtest", "files": [p.name for p in inputs]}
    pairs = read_aligned(*inputs)
    with claim_output(out, kind=CALIBRATION_KIND, form="json", inputs=inputs, overwrite=overwrite):
        record = calibrate(pairs, encoder=encoder, projection=projection, src_lang=src_lang, tgt_lang=tgt_lang,
                           k=k, data=data)
        atomic_write_json(out, record)
    for margin, found in record["measured"].items():
        line = ", ".join(f"{point} {v['threshold']:.4f} (P {v['precision']:.2f} R {v['recall']:.2f} F1 {v['f1']:.2f})"
                         for point, v in found.items())
        click.echo(f"{margin}: {line}", err=True)
    click.echo(f"calibrated {encoder} ({'projection ' + record['space']['projection'] if record['space']['projection'] else 'raw'}) "
               f"on {record['data']['gold_pairs']} gold pairs -> {out}; mine with --calibration {out}", err=True)


COMMANDS = [calibrate_command]
