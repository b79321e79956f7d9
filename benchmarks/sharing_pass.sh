#!/usr/bin/env bash
# The device pass of the GPU memory and sharing work (no network; wheels carried in .whl/): the GPU
# tests of the sharing figures, the memory recorder's cost, and share-check k = 2, 4 on PPO-GPU,
# DQN-GPU and a larger-policy PPO, with each one's profiled trace summarized (JSON + HTML report).
#   bash benchmarks/sharing_pass.sh          (KS=2,4; WORKLOADS="ppo dqn ppo_big"; MPS="ppo": those again
#                                             under an MPS daemon where it can be started, "" for none;
#                                             VARIANTS, PYREF: below)
set -uo pipefail
OUT=${OUT:-/tmp/rlscope-sharing-pass}
KS=${KS:-2,4}
WORKLOADS=${WORKLOADS:-ppo dqn ppo_big}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl >/dev/null 2>&1 || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
nproc | tee -a "$OUT/gpu.txt"
command -v nvidia-cuda-mps-control >/dev/null && echo "mps: yes" | tee -a "$OUT/gpu.txt" || echo "mps: not installed" | tee -a "$OUT/gpu.txt"
# build both native parts once, so no run below pays for a compile
python3 -c "import torch; from rlscope.collectors import cupti_native, torch_native, gpu_memory as m; print(cupti_native.build()); print(torch_native.build(torch)); print(m.load_native(torch))" 2>&1 | tail -3
if [ -z "${SKIP_TESTS:-}" ]; then  # TESTS: a pytest -k expression (default: all of them)
    timeout 120 python3 -m pytest -q -m gpu tests/test_sharing_gpu.py -k "${TESTS:-}" -p no:cacheprovider -s 2>&1 \
        | tee "$OUT/pytest_gpu.log" | tail -15
fi
if [ -z "${SKIP_BENCH:-}" ]; then
    timeout 90 python3 benchmarks/memory_cost.py --n 20000 --json "$OUT/memory_cost.json" 2>&1 | tail -12
fi
for w in ${BASE-$WORKLOADS}; do  # BASE="": no baseline runs (the variants only)
    echo "== $w"
    timeout 150 python3 -m rlscope.cli.main share-check -k "$KS" --timeout 120 --work-dir "/tmp/sc-$w" \
        --json "$OUT/share_$w.json" -- python3 benchmarks/sharing_workloads.py "$w" > "$OUT/share_$w.log" 2>&1
    echo "exit $?"
    grep -v "^rlscope: warning" "$OUT/share_$w.log" | tail -12
    timeout 60 python3 -m rlscope.cli.analyze "/tmp/sc-$w/profile" --raw -q --json "$OUT/summary_$w.json" \
        --html "$OUT/report_$w.html" > /dev/null 2>> "$OUT/share_$w.log"
done
for w in ${MPS-ppo}; do
    echo "== $w under MPS"
    timeout 150 python3 -m rlscope.cli.main share-check --mps -k "$KS" --timeout 120 --work-dir "/tmp/sc-mps-$w" \
        --json "$OUT/share_mps_$w.json" -- python3 benchmarks/sharing_workloads.py "$w" > "$OUT/share_mps_$w.log" 2>&1
    echo "exit $?"
    grep -v "^rlscope: warning" "$OUT/share_mps_$w.log" | tail -12
done
# VARIANTS: the same copies again, to tell what the k = 4 slowdown comes from (the estimate stays that
# of the first trace): "omp1" one thread per pool (OMP/MKL/OpenBLAS), "cpu" the loop with no GPU at all;
# and PYREF=1: k copies of pure-Python work (the host's own contention between interpreters)
for v in ${VARIANTS-}; do
    for w in $WORKLOADS; do
        case $v in
            omp1) envs="OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1"; args="" ;;
            cpu) envs=""; args="--device cpu" ;;
            *) echo "unknown variant $v"; continue ;;
        esac
        echo "== $w ($v)"
        trace=""; [ -d "/tmp/sc-$w/profile" ] && trace="--trace /tmp/sc-$w/profile"
        env $envs timeout 150 python3 -m rlscope.cli.main share-check -k "$KS" --timeout 120 \
            $trace --work-dir "/tmp/sc-$v-$w" --json "$OUT/share_${v}_$w.json" \
            -- python3 benchmarks/sharing_workloads.py "$w" $args > "$OUT/share_${v}_$w.log" 2>&1
        echo "exit $?"
        grep -v "^rlscope: warning" "$OUT/share_${v}_$w.log" | tail -5
    done
done
if [ -n "${PYREF:-}" ]; then
    echo "== pure Python"
    trace=""; [ -d /tmp/sc-ppo/profile ] && trace="--trace /tmp/sc-ppo/profile"
    timeout 100 python3 -m rlscope.cli.main share-check -k "$KS" --timeout 60 $trace \
        --work-dir /tmp/sc-python --json "$OUT/share_python.json" \
        -- python3 benchmarks/sharing_workloads.py python > "$OUT/share_python.log" 2>&1
    grep -v "^rlscope: warning" "$OUT/share_python.log" | tail -5
fi
# at most 8 files come back from the device: bundle the results
( cd "$OUT" && tar czf results.tgz --exclude=results.tgz --warning=no-file-changed . ; find . -mindepth 1 ! -name results.tgz -exec rm -rf {} + )
