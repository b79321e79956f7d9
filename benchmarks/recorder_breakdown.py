"""Where the native backend recorder's time goes per torch op, from C++ (no Python between calls).

    python benchmarks/recorder_breakdown.py [--rounds 3] [--calls 3000] [--reps 25]

Builds benchmarks/recorder_breakdown.cpp (the recorder, collectors/torch_native.cpp, plus timing
loops) the way the recorder is built, then times ``at::add``, ``at::relu`` and ``at::linear``
(1, 2 and 10 observed ops) per call in thread CPU time, the fastest of ``--reps`` loops of
``--calls`` calls, in rounds, each mode in turn:

- ``none``: no callback;
- ``empty``: a callback doing nothing: torch's RecordFunction machinery per observed op;
- ``clocks``, ``+ intern``, ``+ push``: the recorder's work on the outermost op, step by step;
- ``recorder``: the recorder as rlscope runs it (nested ops of ``linear`` muted);
- ``unmuted``: the same with muting off;
- ``off``: the recorder switched off (the light windows).

Prints ns per call over ``none`` (the fastest round), the cost of one muting (an
``enableRecordFunction`` off/on pair) and of one clock read.
"""

from __future__ import annotations

import argparse
import ctypes
from pathlib import Path

OPS = ("at::add", "at::relu", "at::linear")
MODES = ("none", "empty", "clocks", "+ intern", "+ push", "recorder", "unmuted", "off")
STAND_IN = {"none": 0, "empty": 1, "clocks": 2, "+ intern": 3, "+ push": 4}


def load() -> ctypes.CDLL:
    import torch

    from rlscope.collectors import torch_native

    lib = ctypes.CDLL(str(torch_native.build(torch, Path(__file__).with_name("recorder_breakdown.cpp"))))
    for f in ("rb_op", "rb_toggle", "rb_clock"):
        getattr(lib, f).restype = ctypes.c_double
    lib.rb_op.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.rb_toggle.argtypes = lib.rb_clock.argtypes = [ctypes.c_int]
    lib.rb_stand_in.argtypes = lib.tn_enable.argtypes = lib.tn_set_muting.argtypes = [ctypes.c_int]
    return lib


def set_mode(lib: ctypes.CDLL, mode: str) -> None:
    lib.tn_stop()
    lib.rb_stand_in(STAND_IN.get(mode, 0))
    if mode in ("recorder", "unmuted", "off"):
        lib.tn_start()
        lib.tn_set_muting(int(mode != "unmuted"))
        lib.tn_enable(int(mode != "off"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--reps", type=int, default=25)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    lib = load()
    best: dict[str, list[float]] = {m: [float("inf")] * len(OPS) for m in MODES}
    toggle = clock = float("inf")
    for _ in range(args.rounds):
        for mode in MODES:
            set_mode(lib, mode)
            for i in range(len(OPS)):
                lib.rb_op(i, 100)  # warm-up; the recorder learns which ops to mute
                t = min(lib.rb_op(i, args.calls) for _ in range(args.reps))
                best[mode][i] = min(best[mode][i], t)
            lib.rb_discard()
        set_mode(lib, "recorder")
        toggle = min(toggle, *(lib.rb_toggle(args.calls) for _ in range(args.reps)))
        clock = min(clock, *(lib.rb_clock(args.calls) for _ in range(args.reps)))
    set_mode(lib, "none")
    print(
        f"ns per call from C++ (thread CPU time, fastest of {args.rounds} x {args.reps} loops of"
        f" {args.calls}); 'none' as is, the rest over 'none'"
    )
    print(f"{'mode':<10}" + "".join(f"{op:>12}" for op in OPS))
    for mode in MODES:
        row = best[mode] if mode == "none" else [t - b for t, b in zip(best[mode], best["none"], strict=True)]
        print(f"{mode:<10}" + "".join(f"{v:>12.0f}" for v in row))
    print(f"muting (enableRecordFunction off + on): {toggle:.0f} ns; one clock read: {clock:.1f} ns")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
