#!/usr/bin/env bash
# What runs on a lent GPU machine (docs/RESULTS.md, section 6), from the repository root:
#   bash bench/gpu_session.sh minilm   # python train.py on CUDA, MiniLM-L6 on Banking77, seeds 0-2, + eval efficiency
#   bash bench/gpu_session.sh qwen3    # bench/scale_gpu.py: Qwen3-Embedding-0.6B-shaped random backbone
#   bash bench/gpu_session.sh finite   # the per-step finite-loss check's cost, cudnn.benchmark on the head
#   bash bench/gpu_session.sh current  # MiniLM train.py (default recipe, seed 0; ~47 s on an H100), predict vs encode
#                                      # (PREDICT_N texts, default 3080; above that Banking77 test repeats)
#   bash bench/gpu_session.sh paths    # the 0.6B shape's ratio, warm-cache fits and head share per TextCNN path
#                                      # (bench/scale_gpu.py only=head_paths; ~4 min on an H200, ~1 min parts=overhead)
#   bash bench/gpu_session.sh ratio    # the 0.6B shape's training-cost ratio alone + a profiled warm-cache fit
#                                      # (bench/gpu_ratio.py; ~1.5 min on an H100; RATIO_ARGS=optim.compile_step=true
#                                      # compiled: printed no B within 210 s on an H100;
#                                      # profile=false skips the profiled fit)
#   bash bench/gpu_session.sh blend    # the default head=blend's share of inference: host read, none, torch.compile
#   bash bench/gpu_session.sh compile  # the head's forward eager vs torch.compile / CUDA graphs (bench/head_compile.py)
#   bash bench/gpu_session.sh setfit   # bench/peers.py --methods setfit on CUDA (SetFit at 20 pairs per text),
#                                      # SETFIT_SHOTS (default 8) per class, the four tasks, seeds 0-2
# The machine has torch, lightning, transformers, torchmetrics but no omegaconf or datasets and no network, so
# these travel with the working tree (ignored folders, see .git/info/exclude):
#   .whl/              omegaconf, datasets, dill, multiprocess wheels (pip download --python-version 3.12 ...), and
#                      for the setfit stage setfit, sentence-transformers, evaluate, accelerate
#   .gpu/data/         a copy of ../shared/data's four classification tasks
#   .gpu/minilm-fp16/  all-MiniLM-L6-v2 with fp16 weights (loaded back to fp32, as ucse always loads)
#   .gpu/tok-smollm2/  SmolLM2's BPE tokenizer (the random Qwen3-shaped model needs one with an EOS token)
set -uo pipefail
out=${OUT:-/tmp/ucse-gpu-out}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
export UCSE_CACHE_DIR=/tmp/ucse-cache UCSE_DATA_DIR=$PWD/.gpu/data
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, lightning, transformers, datasets, omegaconf, pyarrow; print('torch', torch.__version__, 'lightning', lightning.__version__, 'transformers', transformers.__version__, 'datasets', datasets.__version__, 'pyarrow', pyarrow.__version__, 'cpus', __import__('os').cpu_count())"

for stage in "$@"; do
  exec > >(tee -a "$out/$stage.log") 2>&1
  case $stage in
    minilm)
      for seed in ${SEEDS:-0 1 2}; do
        /usr/bin/time -f "wall %e s, max RSS %M KB" python3 train.py backbone.model=.gpu/minilm-fp16 seed=$seed \
          output_dir=/tmp/runs/minilm-seed$seed progress_bar=false 2>&1 | grep --line-buffered -v -E "^(INFO|WARNING|  warnings)|UserWarning|LOCAL_RANK"
        cp /tmp/runs/minilm-seed$seed/metrics.json "$out/minilm-seed$seed-metrics.json"
      done
      python3 eval.py run=/tmp/runs/minilm-seed0 plots=false efficiency_batches=20 2>&1 | tail -40
      cp /tmp/runs/minilm-seed0/eval.json "$out/minilm-seed0-eval.json"
      ;;
    current)
      /usr/bin/time -f "wall %e s, max RSS %M KB" python3 train.py backbone.model=.gpu/minilm-fp16 seed=0 \
        output_dir=/tmp/runs/minilm-seed0 progress_bar=false 2>&1 | grep --line-buffered -v -E "^(INFO|WARNING|  warnings)|UserWarning|LOCAL_RANK"
      cp /tmp/runs/minilm-seed0/metrics.json "$out/minilm-seed0-metrics.json"
      python3 bench/predict.py run=/tmp/runs/minilm-seed0 n=${PREDICT_N:-3080} repeats=5 device=cuda 2>&1 | grep --line-buffered -v -E "^(INFO|WARNING)|Warning"
      # the same 3080 texts predicted on CUDA (the joint_knn search on the GPU) and on the CPU: largest differences
      python3 -c "
import sys, numpy as np; sys.path.insert(0, '.')
from bench.predict import read_texts
from ucse.inference.classifier import UcseClassifier
t = read_texts(3080)
r = {d: UcseClassifier.from_pretrained('/tmp/runs/minilm-seed0/head', device=d).predict_with_uncertainty(t) for d in ('cuda', 'cpu')}
g = lambda d, k: np.array([row[k] for row in r[d]], dtype=float)
print('cuda vs cpu, 3080 texts: ood_score max |diff|', np.abs(g('cuda', 'ood_score') - g('cpu', 'ood_score')).max(),
      'confidence max |diff|', np.abs(g('cuda', 'confidence') - g('cpu', 'confidence')).max(),
      'labels differ', sum(a['label'] != b['label'] for a, b in zip(r['cuda'], r['cpu'])),
      'ood differ', sum(a['ood'] != b['ood'] for a, b in zip(r['cuda'], r['cpu'])))
" 2>&1 | grep --line-buffered -v -E "^(INFO|WARNING)|Warning|Loading weights"
      ;;
    knn)  # the joint_knn search on CUDA: 30,800 queries against a 10,003-row float16 bank, 768 wide, k = 1
      python3 -c "
import time, torch
from ucse.training.neighbours import neighbour_distances
g = torch.Generator().manual_seed(0)
unit = lambda x: x / x.norm(dim=1, keepdim=True)
q, bank = unit(torch.randn(30800, 768, generator=g)), unit(torch.randn(10003, 768, generator=g)).half()
for dev in ('cuda', 'cuda', 'cpu'):
    b = bank.to(dev); torch.cuda.synchronize(); t = time.perf_counter(); d = neighbour_distances(q, b, 1)
    print(dev, 'search of 30800 texts', round(time.perf_counter() - t, 4), 's')
    ref = d if dev == 'cuda' else ref
print('cuda vs cpu: max |diff|', (ref - d).abs().max().item())
"
      ;;
    setfit)
      timeout ${SETFIT_TIMEOUT:-600} python3 bench/peers.py --methods setfit --shots ${SETFIT_SHOTS:-8} --seeds ${SEEDS:-0 1 2} --setfit-iterations 20 \
        --model .gpu/minilm-fp16 --out "$out/peers" 2>&1 | grep --line-buffered -v -E "^(INFO|WARNING)|Warning|it/s\]|s/it\]"
      ;;
    overhead|finite|paths|blend|qwen3)  # bench/scale_gpu.py: only=<part> (paths: head_paths; qwen3: all parts)
      only=$stage name=$stage
      [ "$stage" = paths ] && only=head_paths name=head-paths
      [ "$stage" = qwen3 ] && only=all name=scale
      python3 bench/scale_gpu.py only=$only tokenizer=.gpu/tok-smollm2 out="$out/qwen3-$name.json" 2>&1 \
        | grep --line-buffered -v -E "^(INFO|WARNING)|UserWarning|LOCAL_RANK"
      ;;
    ratio)
      python3 bench/gpu_ratio.py tokenizer=.gpu/tok-smollm2 out="$out/qwen3-ratio.json" ${RATIO_ARGS:-} 2>&1 \
        | grep --line-buffered -v -E "^(INFO|WARNING)|UserWarning|LOCAL_RANK"
      ;;
    compile)
      for bs in 64 512; do python3 bench/head_compile.py device=cuda hidden=1024 batch=$bs 2>&1 | grep --line-buffered -v "^W"; done
      ;;
  esac
done
