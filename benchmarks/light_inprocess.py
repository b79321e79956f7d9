"""What each collector state costs a launch-bound loop, measured in one process (no process noise).

    python benchmarks/light_inprocess.py [--rounds 5] [--iters 1500] [--json FILE]

`benchmarks/light_cost.py` compares configurations in separate processes, and on the devices two
runs of the same process differ by 10-30%: more than the light windows' cost it looks for. Here
every configuration runs in the same process, in blocks of ``--iters`` iterations, rotated over
``--rounds`` rounds, each block next to an unprofiled one. The loop is `tests/test_gpu_windows.py`'s
step: a ~200 us kernel, 20 ``torch.add`` launches, a synchronize, then 100 us of CPU work, each
part in a scope. Configurations (a session started and stopped per block):

- ``scopes``: scopes only (no GPU tracing, no backend ops, no GPU memory);
- ``memory``: scopes and the GPU memory recorder;
- ``light``: the default GPU profile held in a light window (CUPTI detached, backend recorder off);
- ``light-nomem``: the same without the memory recorder;
- ``full``: every collector on (no windows);
- ``default``: the default profile with its windows, raw and corrected by the analyzer;
- ``default-1pct``: the same with switching budgeted at 1% of the run instead of 3% (longer
  windows, fewer CUPTI attaches).

Reported per configuration: the block's time per iteration over the mean of the unprofiled blocks
around it, median [min-max] over rounds; for ``default`` the corrected figure as well.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

CONFIGS = ("scopes", "memory", "light", "light-nomem", "full", "default", "default-1pct")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=1500)
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--device", default="cuda", help="cuda, or cpu to check the wiring")
    p.add_argument(
        "--workload",
        default="launch",
        choices=["launch", "sim_eager"],
        help="launch: the loop above; sim_eager: one iteration of validation_workloads.py's eager simulator",
    )
    p.add_argument("--json", default=None)
    args = p.parse_args()
    import torch
    from loops import launch_step, sim_eager_step  # this script's directory

    import rlscope
    from rlscope.analysis import analyze

    step = (sim_eager_step if args.workload == "sim_eager" else launch_step)(args.device)

    def block() -> float:
        t0 = time.perf_counter()
        for _ in range(args.iters):
            step()
        return (time.perf_counter() - t0) / args.iters

    def profiled(config: str, tmp: str) -> tuple[float, float | None]:
        os.environ["RLSCOPE_GPU_MEMORY"] = "0" if config in ("scopes", "light-nomem") else "1"
        opts: dict = {"nvml_hz": 0}
        if config in ("scopes", "memory"):
            opts.update(backend=False, gpu=False)
        elif config == "full":
            opts.update(windows=False)
        import rlscope.session as rs

        rs.SWITCH_BUDGET = 0.01 if config == "default-1pct" else 0.03
        session = rlscope.profile(tmp, **opts).start()
        if config.startswith("light"):
            step()  # torch's collectors join on first use; then hold a light window
            if session._window_mode != rs.S.WINDOW_LIGHT:  # a session starts in one
                session.switch_window()
            session.window_due_ns = 1 << 62
        if config == "memory":
            step()
        per_iter = block()
        session.stop()
        corrected = None
        if config.startswith("default"):
            s = analyze(rlscope.load_trace(tmp)).summary
            ops = s["operations"]
            corrected = sum(o["total_s"] for o in ops.values()) / ops["step"]["calls"]
        return per_iter, corrected

    configs = [c for c in args.configs.split(",") if c]
    block()  # warm-up
    with tempfile.TemporaryDirectory() as tmp:
        profiled("default", tmp)  # the first session loads (or builds) the native collectors
    rows: dict[str, list[dict]] = {c: [] for c in configs}
    first_base = block()
    with tempfile.TemporaryDirectory() as tmp:
        before = block()
        for r in range(args.rounds):
            order = configs[r % len(configs) :] + configs[: r % len(configs)]
            for i, config in enumerate(order):
                per_iter, corrected = profiled(config, os.path.join(tmp, f"{config}-{r}-{i}"))
                after = block()  # the unprofiled block after one configuration is before the next
                base = (before + after) / 2
                rows[config].append(
                    {"base": base, "raw": per_iter / base, "corrected": corrected and corrected / base}
                )
                extra = f"  corrected {corrected / base:.3f}" if corrected else ""
                print(f"round {r + 1} {config:12} base {base * 1e6:7.1f} us raw {per_iter / base:.3f}{extra}")
                before = after
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    out = {"device": name, "iters": args.iters, "first_base_us": first_base * 1e6}
    print(f"first unprofiled block (before any session): {first_base * 1e6:.1f} us per iteration")
    for config, rs in rows.items():
        raw = [x["raw"] for x in rs]
        line = f"{config:12} raw {statistics.median(raw):.3f} [{min(raw):.3f}-{max(raw):.3f}]"
        cor = [x["corrected"] for x in rs if x["corrected"]]
        if cor:
            line += f"  corrected {statistics.median(cor):.3f} [{min(cor):.3f}-{max(cor):.3f}]"
        print(line)
        out[config] = rs
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
