"""Rebuild the golden traces and their summaries (tests/test_golden.py compares against them).

Run only when a change of the analysis's output is intended: ``python -m tests.golden.build``.
The traces are built on a fake clock (exact, synthetic GPU records) and one short real CPU PPO run,
so the analysis of each is deterministic once the trace is on disk. ``--summaries`` keeps the
committed traces and writes their summaries again (an analysis change, not a recording change).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
TRACES = HERE / "traces"


def summary(trace_dir: Path, correct: bool) -> dict:
    from rlscope.analysis import analyze

    out = json.loads(json.dumps(analyze(trace_dir, correct=correct).summary, default=str))
    out.pop("trace_dir", None)  # where the clone lives, not what the analysis found
    return out


def build_windowed(out: Path) -> None:
    import rlscope
    from tests.conftest import FakeClock
    from tests.test_windows import _run_fake

    clock = FakeClock()
    sess = rlscope.profile(out, backend=False, gpu=False, window_s=50e-6)
    sess.clock = clock
    _run_fake(sess, clock, 400, long_every=50)


def build_gpu(out: Path) -> None:
    import rlscope
    from rlscope import categories as C
    from rlscope.trace import schema as S
    from tests.conftest import FakeClock, write_stream

    clock = FakeClock()
    sess = rlscope.profile(out, backend=False, gpu=False)
    sess.clock = clock
    rows = []
    with sess:
        st = None
        for i in range(20):
            t0 = clock.now
            with rlscope.scope("inference"):
                clock.advance(100)
            with rlscope.scope("backprop"):
                clock.advance(300)
            with rlscope.scope("simulation"), rlscope.simulator():
                clock.advance(500)
            st = st or sess.thread_states()[0]
            c = 2 * i + 1
            rows += [
                (C.CUDA_API, t0 + 10, t0 + 30, c, st.thread, -1, -1, 0, 0),
                (C.GPU_KERNEL, t0 + 40, t0 + 160, c, -1, 0, 7, 0, 0),
                (C.CUDA_API, t0 + 120, t0 + 125, c + 1, st.thread, -1, -1, 0, 0),
                (C.GPU_MEMCPY, t0 + 150, t0 + 170, c + 1, -1, 0, 7, 0, 64),
                (C.GPU_KERNEL, t0 + 600, t0 + 610, 10_000 + i, -1, 0, 7, 0, 0),
            ]
    write_stream(sess.process_dir / S.GPU_FILE, S.GPU_COLUMNS_DOC, rows)


def build_ppo(out: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rlscope.cli.main",
            "demo",
            "--seconds",
            "2",
            "--device",
            "cpu",
            "--raw",
            "--trace-dir",
            str(out),
            "--html",
            str(out.parent / "unused.html"),
        ],
        check=True,
        capture_output=True,
    )
    (out.parent / "unused.html").unlink(missing_ok=True)


BUILDERS = {"windowed": build_windowed, "gpu_synthetic": build_gpu, "ppo_cpu": build_ppo}


def main() -> None:
    keep_traces = "--summaries" in sys.argv[1:]
    for name, build in BUILDERS.items():
        out = TRACES / name
        if not keep_traces:
            shutil.rmtree(out, ignore_errors=True)
            build(out)
        for correct in (True, False):
            path = HERE / f"{name}.{'corrected' if correct else 'raw'}.json"
            path.write_text(json.dumps(summary(out, correct), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
