#!/usr/bin/env bash
# Set everything up, then run the main job on the shipped demo: mine German-English bitext from
# demo/de.txt and demo/en.txt (117 translations hidden among 50 unrelated lines on each side)
# with the embedded default encoder (ratio margin, k=4, max retrieval, threshold 1.04 as
# WikiMatrix recommends), and score the result against demo/gold.tsv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
mkdir -p out
.venv/bin/xmine mine demo/de.txt demo/en.txt --src-lang de --tgt-lang en \
    --threshold 1.04 --line-numbers --overwrite -o out/demo-mined.tsv "$@"
echo
echo "top of out/demo-mined.tsv (score, German, English, line numbers):"
head -n 5 out/demo-mined.tsv
.venv/bin/python - <<'PY'
import csv
gold = {tuple(r) for r in csv.reader(open("demo/gold.tsv"), delimiter="\t")}
rows = [l.rstrip("\n").split("\t") for l in open("out/demo-mined.tsv", encoding="utf-8")]
found = {(r[3], r[4]) for r in rows}
tp = len(found & gold)
print(f"\nmined {len(rows)} pairs; {tp} of the {len(gold) - 1} hidden translations found "
      f"(precision {tp / max(len(rows), 1):.1%}, recall {tp / (len(gold) - 1):.1%})")
PY
