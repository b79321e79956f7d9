#!/usr/bin/env bash
# The GPU pass of the foundation and GPU-layer issues, as run on the device machine (no network):
# wheels carried in .whl/ (gymnasium, farama-notifications, cupti-python, plotly), results in $OUT.
#   bash benchmarks/gpu_pass.sh
set -uo pipefail
OUT=${OUT:-/tmp/rlscope-gpu-pass}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/gymnasium-*.whl .whl/farama_notifications-*.whl .whl/cupti_python-*.whl .whl/plotly-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m pytest -q -m gpu tests/test_gpu_ground_truth.py tests/test_cartpole_sim.py tests/test_chain_sim.py 2>&1 | tee "$OUT/pytest_gpu.log"
python3 -m pytest -q tests/test_gpu_degrade.py tests/test_gpu_analysis.py tests/test_annotate.py 2>&1 | tail -3
for b in kineto cupti; do
    timeout 100 python3 benchmarks/gpu_overhead.py --gpu $b --json "$OUT/gpu_overhead_$b.json" 2>&1 | tail -16
done
timeout 240 python3 benchmarks/ppo_overhead.py --device cuda --timesteps "${TIMESTEPS:-8192}" --reps "${REPS:-2}" \
    --json "$OUT/ppo_overhead_cuda.json" 2>&1 | grep -v "^rlscope: warning" | tail -30
timeout 150 python3 -m rlscope.cli.main demo --device cuda --seconds 20 --trace-dir /tmp/demo-trace \
    --json "$OUT/demo_cuda.json" --html "$OUT/demo_cuda.html" 2>&1 | tee "$OUT/demo_cuda.log" | tail -45
