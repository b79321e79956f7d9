"""Category codes shared by collectors, the trace schema and the analyzer.

Codes are small ints so event rows stay narrow; names are what users see. CPU categories nest
per thread and the innermost one wins (cuda_api inside backend inside simulator inside python;
compile inside simulator, around the backend ops and CUDA calls a compiler makes, and inside a
program's torch op that torch compiles in, such as ``loss.backward()`` compiling its graph).

``waiting`` is not work: a process blocked until its next command or task arrives (a vector-env or
Pool worker in its receive, rlscope/runtime/waits.py). Outside operations it is reported as the
``[waiting]`` row, never as ``[unannotated]``, and no figure of work (busy time, what-if targets)
counts it.
"""

from __future__ import annotations

PYTHON = 0
SIMULATOR = 1
BACKEND = 2
CUDA_API = 3
GPU_KERNEL = 4
GPU_MEMCPY = 5
GPU_MEMSET = 6
PROFILER = 7  # rlscope's own work on the user's thread (GPU trace rotation), shown, not hidden
COMPILE = 8  # a JIT compiling: JAX tracing, lowering, XLA compiling a function; torch.compile compiling one
WAITING = 9  # blocked until the next command or task arrives (rlscope/runtime/waits.py): not work


CPU_CATEGORIES: dict[int, str] = {
    PYTHON: "python",
    SIMULATOR: "simulator",
    BACKEND: "backend",
    CUDA_API: "cuda_api",
    PROFILER: "rlscope",
    COMPILE: "compile",  # named "xla_compile" before torch.compile was recorded too: the code is the same
    WAITING: "waiting",
}
GPU_CATEGORIES: dict[int, str] = {
    GPU_KERNEL: "gpu_kernel",
    GPU_MEMCPY: "gpu_memcpy",
    GPU_MEMSET: "gpu_memset",
}
CATEGORY_NAMES: dict[int, str] = dict(sorted({**CPU_CATEGORIES, **GPU_CATEGORIES}.items()))

# What time in no operation, or in no phase, is reported as (every table and every file says the same)
UNANNOTATED = "[unannotated]"
NO_PHASE = "[no phase]"
# What time in no operation spent in the ``waiting`` category is reported as, apart from [unannotated]
WAITING_ROW = "[waiting]"
