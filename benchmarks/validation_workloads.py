"""The project's own validation workloads as scripts, for ``rlscope validate -- python THIS NAME``.

    python benchmarks/validation_workloads.py {ppo_cpu,ppo_gpu,dqn,sim_eager,scopes} [--scale 1.0]

Each warms up (imports, CUDA context, allocator) outside ``rlscope.profile``, then runs the
workload inside it, so ``rlscope validate``'s modes (unprofiled, plain timers, profiled) time the
same region. Sizes: about 2-5 s each on the development VM (``--scale`` multiplies them).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from overhead_validation import _dqn, _ppo, _scopes, _sim_eager

import rlscope


def _touch_cupti(warmup: Callable[[], None]) -> None:
    """Run ``warmup`` with CUPTI attached (every kind rlscope records), then detach it as rlscope does.

    In every mode of ``rlscope validate``, unprofiled ones included, so a cost that CUPTI's first
    attach leaves in a process for good is in all of them: if the profiled run's miss against the
    unprofiled one goes away with this, that cost is what the windows could not see. The native
    consumer directly, not a session: under validate, ``rlscope.profile`` is the measured region.
    """
    import ctypes

    import numpy as np

    from rlscope.collectors import cupti_native as cn

    lib = ctypes.CDLL(str(cn.build()))
    lib.rl_start_kinds.argtypes = [ctypes.c_uint]
    lib.rl_drain.restype = lib.rl_pending.restype = ctypes.c_size_t
    lib.rl_drain.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.rl_set_detach(1)
    if lib.rl_start_kinds(cn.kinds_mask()) != 0:
        print("touch-cupti: CUPTI refused", file=sys.stderr)
        return
    warmup()
    lib.rl_stop()  # flushes and detaches
    n = lib.rl_pending()
    buf = np.empty(n, cn.ROW)  # drained here, or the measured session's first flush would get them
    lib.rl_drain(buf.ctypes.data, n)
    print(f"touch-cupti: {n} records traced and dropped", file=sys.stderr)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", choices=["ppo_cpu", "ppo_gpu", "dqn", "sim_eager", "scopes"])
    p.add_argument("--scale", type=float, default=1.0, help="multiply the workload's size")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="dqn and sim_eager")
    p.add_argument(
        "--touch-cupti",
        action="store_true",
        help="diagnostic: CUPTI traces the warm-up and is detached, before the timed region, in every mode",
    )
    p.add_argument(
        "--thread-cpu",
        action="store_true",
        help="diagnostic: the main thread's and the other threads' CPU time over the timed region",
    )
    args = p.parse_args()
    import torch

    cuda = torch.cuda.is_available() and args.device != "cpu"
    dev = "cuda" if cuda else "cpu"
    n = lambda k: max(int(k * args.scale), 1)  # noqa: E731
    make = {
        "ppo_cpu": lambda: _ppo("cpu", n(4096)),
        "ppo_gpu": lambda: _ppo("cuda", n(4096)),
        "dqn": lambda: _dqn(n(6000)),
        "sim_eager": lambda: _sim_eager(dev, n(4000)),
        "scopes": lambda: _scopes(n(200_000)),
    }[args.workload]
    gpu = "auto" if args.workload == "ppo_gpu" or (cuda and args.workload == "sim_eager") else False
    # warm-up outside the measured region: a short run of the same workload (CUDA context, cuBLAS
    # handles, allocator, first-call initialization), as any user's first iterations would do
    scale = args.scale
    args.scale = min(scale, 0.1)
    if args.touch_cupti and cuda:
        _touch_cupti(make())
    else:
        make()()
    args.scale = scale
    run = make()
    wall, proc, main_cpu = time.perf_counter(), time.process_time(), time.thread_time()
    with rlscope.profile("rlscope-trace-" + args.workload, gpu=gpu):
        run()
    if args.thread_cpu:  # the other threads' share: exited threads count in process_time too
        wall, proc = time.perf_counter() - wall, time.process_time() - proc
        main_cpu = time.thread_time() - main_cpu
        print(
            f"thread-cpu: wall {wall:.3f} s, main thread {main_cpu:.3f} s ({100 * main_cpu / wall:.0f}%),"
            f" other threads {proc - main_cpu:.3f} s ({100 * (proc - main_cpu) / wall:.0f}% of a core)",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
