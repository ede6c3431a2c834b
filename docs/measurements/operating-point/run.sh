#!/usr/bin/env bash
# One draw of the moderation files (K = 0: the trial's), trained with ucse's defaults, then the two operating
# points set by `ucse calibrate` on copies of the run, and the baseline; run from the repository root:
#   bash docs/measurements/operating-point/run.sh K
set -euo pipefail
k=${1:-0}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
cd "$work"
python "$here/make_data.py" "$k" > /dev/null
export UCSE_CACHE_DIR="$work/cache"
ucse train data.path=export_comments.csv data.text_column=comment_text data.label_column=moderation_label \
  output_dir=runs/default > train.log 2>&1
for rule in precision=0.75 recall=0.8; do
  cp -r runs/default "runs/${rule%%=*}"
  ucse calibrate run="runs/${rule%%=*}" uncertainty.decision.label=abusive "uncertainty.decision.$rule" \
    | grep '^decision:' | sed "s/^/draw $k: /"
done
for run in default precision recall; do
  ucse predict run="runs/$run" input=next_week.csv out="pred_$run.jsonl" 2> /dev/null
done
python "$here/baseline.py" 2> /dev/null | sed "s/^/draw $k: /"
python "$here/score.py" "draw $k:"
rm -rf "$work"
