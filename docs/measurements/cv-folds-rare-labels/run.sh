#!/bin/bash
# The catalog trial's file (271 labels, 9 with 2 rows after data.min_label_rows=2): the cross-validation's folds
# capped at the rarest label's rows (old) or not (new); scored on the trial's separate 500-row test file.
# The files come from make_data.py (run it here first).
cd "$(dirname "$0")"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 UCSE_CACHE_DIR=$PWD/cache
for v in old new; do
  if [ $v = old ]; then export PYTHONPATH=${OLD_TREE:?set OLD_TREE to a worktree of the commit before the change}; else unset PYTHONPATH; fi
  /usr/bin/time -f "wall %e s, peak RSS %M KB" python -m ucse train data.path=catalog_train.csv data.text_column=title data.label_column=category data.min_label_rows=2 output_dir=runs/$v progress_bar=false > log-$v.txt 2>&1
  python -m ucse eval run=runs/$v input=catalog_test.csv drop_bad_rows=true out=eval-$v.json plots=false > eval-$v.txt 2>&1
done
echo done
