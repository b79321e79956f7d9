#!/usr/bin/env bash
# Diagnose the PPO-GPU window correction on the device: a short profiled run, its trace and summary.
set -uo pipefail
OUT=${OUT:-/tmp/diag}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit 1
R=$PWD; cd /tmp && python3 $R/benchmarks/validation_workloads.py ppo_gpu --scale 0.25 2>&1 | tail -3
cd - >/dev/null
ls /tmp/rlscope-trace-ppo_gpu
python3 - <<'PY' 2>&1 | tee "$OUT/diag.txt"
import json, numpy as np, rlscope
from rlscope.analysis.summary import summarize_trace
from rlscope.analysis import gpu
t = rlscope.load_trace("/tmp/rlscope-trace-ppo_gpu")
print("processes", [p.pid for p in t.processes])
s = summarize_trace(t)
print("wall", s["wall_s"], "raw", s["raw"]["wall_s"], "unann", s["unannotated_s"], s["raw"]["unannotated_s"])
for k, v in s["operations"].items():
    print(k, round(v["total_s"], 4), round(s["raw"]["operations"][k]["total_s"], 4), v["calls"])
p = t.processes[0]
tl, api, rec = gpu.timeline_with_gpu(p)
print("main", tl.main_thread, "threads", {int(th): int((tl.thread == th).sum()) for th in np.unique(tl.thread)})
print("start/end", tl.start_ns, tl.end_ns, "last rows per thread", [int(tl.seg_end[tl.thread == th].max()) for th in np.unique(tl.thread)])
print(json.dumps(s["overhead"], indent=0, default=str)[:3000])
PY
cp -r /tmp/rlscope-trace-ppo_gpu "$OUT/trace"
( cd "$OUT" && tar czf trace.tgz trace && rm -rf trace )
