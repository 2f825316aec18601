#!/usr/bin/env bash
# Set everything up, then run the main job on the shipped demo: mine German-English bitext from
# demo/de.txt and demo/en.txt (117 translations hidden among 50 unrelated lines on each side)
# with the embedded default encoder and its shipped meaning projection (the implicit default:
# ratio margin, k=4, max retrieval, the projection's own calibrated threshold), and score the
# result against demo/gold.tsv. Beside it, the same with raw embeddings (--projection none) at
# their own calibrated threshold (docs/mining.md, "Default thresholds").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
mkdir -p out
.venv/bin/xmine mine demo/de.txt demo/en.txt --src-lang de --tgt-lang en \
    --line-numbers --overwrite -o out/demo-mined.tsv "$@"
.venv/bin/xmine mine demo/de.txt demo/en.txt --src-lang de --tgt-lang en \
    --projection none --line-numbers --overwrite -o out/demo-mined-raw.tsv
echo
echo "top of out/demo-mined.tsv (score, German, English, line numbers):"
head -n 5 out/demo-mined.tsv
.venv/bin/python - <<'PY'
import csv
import json

gold = {tuple(r) for r in csv.reader(open("demo/gold.tsv"), delimiter="\t")}
print()
for label, path in (("shipped meaning projection (the default)", "out/demo-mined.tsv"),
                    ("raw embeddings (--projection none)", "out/demo-mined-raw.tsv")):
    rows = [l.rstrip("\n").split("\t") for l in open(path, encoding="utf-8")]
    t = json.load(open(path + ".json"))["threshold"]["value"]
    tp = len({(r[3], r[4]) for r in rows} & gold)
    print(f"{label}, threshold {t:g}: mined {len(rows)} pairs; {tp} of the {len(gold) - 1} hidden "
          f"translations found (precision {tp / max(len(rows), 1):.1%}, recall {tp / (len(gold) - 1):.1%})")
PY
