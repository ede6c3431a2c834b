#!/bin/bash
# The imbalanced files (3 subsamples): the default run, its profile refitted with prior=balanced by this code
# (bal) and by the code before (oldbal), each predicting the balanced test file and the off-topic texts.
. <repo>/.venv/bin/activate; export UCSE_CACHE_DIR=<cache>
cd <out>; mkdir -p runs pred logs
D=<data from make_data.py>
for s in 0 1 2; do
  r=runs/imb_s$s
  [ -d $r ] || ucse train data.path=$D/train_imb_s$s.csv data.text_column=utterance data.label_column=intent data.test_fraction=0 output_dir=$r > logs/train_s$s.txt 2>&1
  rm -rf runs/bal_s$s runs/oldbal_s$s; cp -r $r runs/bal_s$s; cp -r $r runs/oldbal_s$s
  ucse calibrate run=runs/bal_s$s uncertainty.calibration.prior=balanced > logs/cal_s$s.txt 2>&1
  (cd <checkout of the code before> && python -m ucse calibrate run=<out>/runs/oldbal_s$s uncertainty.calibration.prior=balanced) > logs/oldcal_s$s.txt 2>&1
  for v in imb bal oldbal; do
    for f in test.csv ood_far.txt ood_near.txt; do
      ucse predict run=runs/${v}_s$s input=$D/$f out=pred/${v}_s${s}_${f%.*}.jsonl overwrite=true >> logs/pred_s$s.txt 2>&1
    done
  done
done
echo done
