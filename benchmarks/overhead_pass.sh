#!/usr/bin/env bash
# The device pass of the overhead-correction issue (no network; wheels carried in .whl/): calibrate,
# the GPU tests, the overhead validation on every workload, and the GPU demo (corrected), into $OUT.
#   bash benchmarks/overhead_pass.sh
set -uo pipefail
OUT=${OUT:-/tmp/rlscope-overhead-pass}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/gymnasium-*.whl .whl/farama_notifications-*.whl .whl/cupti_python-*.whl .whl/plotly-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
export RLSCOPE_CALIBRATION_DIR="$OUT/calibration"
( time python3 -m rlscope.cli.main calibrate ) 2>&1 | tee "$OUT/calibrate.log" | tail -30
timeout 200 python3 -m pytest -q -m gpu tests/ -p no:cacheprovider 2>&1 | tee "$OUT/pytest_gpu.log" | tail -4
timeout ${VALIDATION_TIMEOUT:-330} python3 benchmarks/overhead_validation.py --reps "${REPS:-3}" \
    --json "$OUT/validation.json" 2>&1 | grep -v "^rlscope: warning" | tee "$OUT/validation.log" | tail -70
