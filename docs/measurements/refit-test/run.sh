#!/bin/bash
# ucse default on the skeptic's 13 labels x 15 rows (3 subsamples), data.refit_test on (default) vs off,
# scored by `ucse eval input=` on the same 420-row test file.
cd <out>
. <repo>/.venv/bin/activate
export UCSE_CACHE_DIR=<cache> HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
D=<data>
for s in 0 1 2; do
  for rt in true false; do
    out=runs/s${s}_${rt}
    rm -rf $out
    /usr/bin/time -f "%e s" ucse train data.path=$D/train_s$s.csv data.text_column=utterance data.label_column=intent \
      data.refit_test=$rt output_dir=$out > logs_s${s}_${rt}.txt 2>&1
    ucse eval run=$out input=$D/test.csv out=<out>/eval_s${s}_${rt}.json overwrite=true >> logs_s${s}_${rt}.txt 2>&1
    python -c "
import json; r=json.load(open('<out>/eval_s${s}_${rt}.json')); m=r['metrics']; c=r.get('calibration',{})
print('seed $s refit_test=$rt', 'acc %.4f f1 %.4f ece_after %s' % (m['accuracy'], m['f1_macro'], c.get('ece_after')))"
    grep -E " s$" logs_s${s}_${rt}.txt | tail -1
  done
done
