#!/bin/bash
# data.refit_test on a file large enough to select on a validation split: the shipped head scored on the
# task's official test split (never carved, never trained on), with and without the test slice in its refit.
set -e
cd "$(dirname "$0")"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 UCSE_CACHE_DIR=$PWD/cache
for task in scenario banking; do
  for v in true false; do
    /usr/bin/time -f "wall %e s, peak RSS %M KB" ucse train data.path=${task}_train.csv output_dir=runs/${task}-${v} data.refit_test=$v progress_bar=false > log-${task}-${v}.txt 2>&1
    ucse eval run=runs/${task}-${v} input=${task}_test.csv out=eval-${task}-${v}.json plots=false > eval-${task}-${v}.txt 2>&1
  done
done
echo done
