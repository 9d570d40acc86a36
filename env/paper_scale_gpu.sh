#!/usr/bin/env bash
# Paper-scale check of a GPU node: the lab launches the PyTorch synthetic benchmark
# (ResNet-50 and MobileNetV2, 224x224, batch 64 per GPU, as in the KungFu artifact's
# commands) through lab.cluster on every GPU, records runs under results/, and prints the
# throughput table from the run directories; then EasyScale's Figs 9-13 on the node's GPUs
# (lab.experiments.easyscale.gpu_node: ResNet50 at 224x224, EASYSCALE_STEPS mini-batches a
# launch; EASYSCALE_STEPS=0 skips it). Needs torch + torchvision with CUDA, psutil, pyyaml,
# pandas, pyarrow and plotly on the node.
#
# Usage: env/paper_scale_gpu.sh [PYTHON] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-python3}
steps=${2:-60}
gpus=$("$py" -c 'import torch; print(torch.cuda.device_count())')
[ "$gpus" -ge 1 ] || { echo "no GPU visible to PyTorch" >&2; exit 1; }
export DISTLAB_RESULTS=${DISTLAB_RESULTS:-$PWD/results}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
for model in resnet50 mobilenet_v2; do
  for flags in "" "--amp --channels-last"; do
    tag=$([ -n "$flags" ] && echo bf16-nhwc || echo fp32)
    "$py" -m lab launch --launcher local -np "$gpus" --hosts "localhost:$gpus" \
      --experiment "gpu/$model-$tag" --timeout 900 -- \
      "$py" -m lab.bench.torch_synthetic --model $model --batch-size 64 --image-size 224 \
      --warmup-steps 10 --steps "$steps" --device cuda $flags | grep -E "^(Img|Total)|results/" || true
  done
done
"$py" - <<'PY'
from lab.metrics import list_runs, load_run, summarize_run
for exp in ("resnet50-fp32", "resnet50-bf16-nhwc", "mobilenet_v2-fp32", "mobilenet_v2-bf16-nhwc"):
    for run in list_runs(f"gpu/{exp}"):
        s = summarize_run(run, warmup=0)
        keep = {k: v for k, v in s.items() if "throughput" in k or k in ("state", "np")}
        print(exp, keep)
PY
easyscale_steps=${EASYSCALE_STEPS:-5}
if [ "$easyscale_steps" -gt 0 ]; then
  profile=$([ "$gpus" -ge 4 ] && echo easyscale-gpu || echo easyscale-gpu-1)
  "$py" -m lab.experiments.easyscale.gpu_node --cluster "$profile" --steps "$easyscale_steps"
fi
