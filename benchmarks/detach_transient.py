"""Does a window switch slow the next call of an operation whose kernels ran before it, in a light window?

    python benchmarks/detach_transient.py [--reps 30] [--device cuda] [--json FILE]

The windows correction takes a light window's calls as the operation's unprofiled level, and takes
out of it only the one call right after each switch (rlscope/overhead/correct/windows.py). In PPO the
update (``backprop``) runs once per 128 steps, so nearly every update in a light window is the
first of its kernels since CUPTI was detached (and, before that, attached): if the driver or CUPTI
leaves work for a kernel's first launch after a detach (modules instrumented on attach, restored
on detach), every light-window update pays it, and the correction keeps it. The twin-process
measurement (`benchmarks/lockstep.py --loop ppo`) put PPO-GPU's corrected figure +6% high in 2
of 3 rounds on the H100, with no light-state part large enough to explain it.

Here, in one process with a default GPU session held in a light window, per repetition (the two
cases in a random order):

- ``held``: 128 rollout steps (``inference`` + ``simulation``), then the update, timed with a
  synchronize on each side, then a second update right after;
- ``cycled``: a full window for 20 rollout steps, a light one for the other 108, then the same two
  timed updates: the first is the first launch of the update's kernels since the detach.

``cycled / held`` for the first update is the transient; for the second, the check that it is
gone once the kernels ran again. Results: BENCHMARKS.md section 9, seventeenth session.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--device", default="cuda", help="cuda, or cpu to check the wiring")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    import torch
    from loops import UPDATE_EVERY, ppo_rollout, ppo_update

    import rlscope
    import rlscope.session as rs

    collect, agent, opt, dev = ppo_rollout(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def rollout(n: int, batch: tuple[list, list]) -> None:
        for _ in range(n):
            collect(*batch)

    def timed_update(batch: tuple[list, list]) -> float:
        sync()
        t0 = time.perf_counter()
        ppo_update(agent, opt, *batch)
        sync()
        return time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        session = rlscope.profile(Path(tmp) / "t").start()
        for _ in range(3):  # warm: every kernel launched in both kinds of window
            b: tuple[list, list] = ([], [])
            rollout(UPDATE_EVERY, b)
            timed_update(b)
            session.switch_window()
        if session._window_mode != rs.S.WINDOW_LIGHT:
            session.switch_window()
        session.window_due_ns = 1 << 62  # hold: switches only where this script makes them
        rng = random.Random(0)
        out: dict[str, list[float]] = {"held": [], "held_2nd": [], "cycled": [], "cycled_2nd": []}
        for _ in range(args.reps):
            for case in rng.sample(["held", "cycled"], 2):
                b = ([], [])
                if case == "cycled":
                    session.switch_window()  # full: CUPTI attached
                    rollout(20, b)
                    session.switch_window()  # light: detached
                    rollout(UPDATE_EVERY - 20, b)
                else:
                    rollout(UPDATE_EVERY, b)
                out[case].append(timed_update(b))
                out[case + "_2nd"].append(timed_update(b))
        session.stop()
    first = [c / h for c, h in zip(out["cycled"], out["held"], strict=True)]
    second = [c / h for c, h in zip(out["cycled_2nd"], out["held_2nd"], strict=True)]
    med = {k: statistics.median(v) * 1e6 for k, v in out.items()}
    print("update, us (median over reps): " + ", ".join(f"{k} {v:.0f}" for k, v in med.items()))
    q = statistics.quantiles
    print(
        f"cycled / held, first update after the detach: {statistics.median(first):.3f} "
        f"[quartiles {q(first)[0]:.3f}-{q(first)[2]:.3f}]"
    )
    print(
        f"cycled / held, second update: {statistics.median(second):.3f} "
        f"[quartiles {q(second)[0]:.3f}-{q(second)[2]:.3f}]"
    )
    print(f"first-after-detach excess: {med['cycled'] - med['held']:.0f} us a call")
    if args.json:
        Path(args.json).write_text(json.dumps({"times_s": out, "first": first, "second": second}, indent=2))


if __name__ == "__main__":
    main()
