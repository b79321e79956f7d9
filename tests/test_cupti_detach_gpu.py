"""A light window really detaches CUPTI, even with the writer flushing at every moment (``pytest -m
gpu``; skipped without CUDA).

CUPTI attached with its kinds off still intercepts every CUDA call (+10-19% on this loop on an
H200). The writer's flush (CUPTI's clock, a forced flush, API names) once ran unlocked beside the
main thread's cuptiFinalize and could attach CUPTI again for the rest of a light window
(collectors/cupti_native.c, cupti_mu). Each block of launches is paired with the same loop on the
CPU, so the machine's speed moving between the phases cancels."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

CHILD = """
import json, sys, time, torch, rlscope
import rlscope.session as rs
x, c = torch.ones(64, device="cuda"), torch.ones(64)
def block(t, n=1500):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        torch.add(t, 1)
    torch.cuda.synchronize()
    return time.perf_counter_ns() - t0
def pairs(k=31):
    return [block(x) / block(c) for _ in range(k)]
pairs(3)
before = pairs()
s = rlscope.profile(sys.argv[1], backend=False, nvml_hz=0, flush_interval=0.002).start()
for _ in range(60):  # attach and detach, the writer flushing all the while
    s.switch_window()
    block(x, 300)
if s.windows.mode != rs.S.WINDOW_LIGHT:
    s.switch_window()
s.window_due_ns = 1 << 62  # held light
held = pairs()
s.stop()
print(json.dumps({"before": before, "held": held}))
"""


def _held_over_before(tmp_path, detach: str) -> float:
    env = {**os.environ, "RLSCOPE_CUPTI_DETACH": detach, "RLSCOPE_GPU_MEMORY": "0"}
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "trace")],
        capture_output=True, text=True, timeout=300, env=env, check=True,
    )  # fmt: skip
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return statistics.median(got["held"]) / statistics.median(got["before"])


def test_a_held_light_window_costs_launches_nothing_after_many_switches(tmp_path):
    # three processes of each, interleaved, and their medians: one of each failed 1 time in 7 on the
    # H100s of one day (kept 1.054, detached 1.094: a process's paired medians move ~5% with the
    # machine's speed)
    kept, detached = [], []
    for i in range(3):
        kept.append(_held_over_before(tmp_path / f"k{i}", "0"))  # the positive control: kinds off, attached
        detached.append(_held_over_before(tmp_path / f"d{i}", "1"))
    k, d = statistics.median(kept), statistics.median(detached)
    # the test sees the attached state's cost (H200: 1.19, 1.10), and the detached window is nearer
    # no cost than that cost (0.99, 0.91)
    assert k > 1.05, (kept, detached)
    assert d < 1 + (k - 1) / 2, (kept, detached)
