"""``rlscope calibrate``: measure what each kind of recorded event costs on this machine and stack.

Method (docs/overhead.md): every cost is a *differential* measurement. A micro-workload runs
unprofiled and profiled, interleaved, several times; the profiled-minus-unprofiled time per event
is the event's total cost. The trace of the profiled run, analyzed by rlscope's own analyzer, says
how much of that cost landed *inside* the begin/end pair (charged to the operation or category it
opens) -- the rest landed *outside* (charged to the enclosing one). That split is exactly what the
correction needs, and measuring it with the analyzer means the calibration sees time the way the
analyzer will. Each micro-workload does a little Python work between events, as real loops do, so
the profiler's code does not run unrealistically hot in the caches.

Measured: scopes (with and without NVTX ranges), simulator/category boundaries, backend-op
recording (a mix of small torch calls like an RL loop's), each CUDA API call under each GPU
collector, the trace writer (which stalls the job through the GIL while it converts events) and
the NVML sampler. Takes 20-60 s.
"""

from __future__ import annotations

import datetime
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rlscope
from rlscope import calibration as cal_mod
from rlscope.annotate import simulator

OUTER = rlscope.scope("rlscope.calibrate.outer")
INNER = rlscope.scope("rlscope.calibrate.inner")
_SIM = simulator()
NO_FLUSH = 1e6  # flush interval that never fires during a measured loop: the writer is measured apart


def _work(state: list[int]) -> None:
    """A little Python between events (~0.3 us): a loop never runs the profiler's code back to back."""
    state[0] = (state[0] * 1103515245 + 12345) & 0x7FFFFFFF


def _scope_loop(n: int) -> None:
    state = [1]
    with OUTER:
        for _ in range(n):
            _work(state)
            with INNER:
                pass


def _category_loop(n: int) -> None:
    state = [1]
    with OUTER:
        for _ in range(n):
            _work(state)
            with _SIM:
                pass


def _timed(fn: Callable[[int], None], n: int) -> float:
    t0 = time.perf_counter_ns()
    fn(n)
    return float(time.perf_counter_ns() - t0)


def _profiled(fn: Callable[[int], None], n: int, path: Path, options: dict[str, Any]) -> tuple[float, Any]:
    """Time ``fn(n)`` under a session; returns (ns, raw summary of its trace)."""
    from rlscope.analysis.summary import summarize_trace
    from rlscope.trace.reader import load_trace

    with rlscope.profile(path, **{"flush_interval": NO_FLUSH, "backend": False, "gpu": False, **options}):
        t = _timed(fn, n)
    trace = load_trace(path)
    return t, (trace, summarize_trace(trace, correct=False))


def _differential(
    fn: Callable[[int], None], n: int, reps: int, root: Path, options: dict[str, Any]
) -> tuple[float, float, list[Any]]:
    """Median unprofiled and profiled ns of ``fn(n)`` over interleaved repetitions, and the traces."""
    fn(max(n // 10, 1))  # warm-up: imports, caches, allocator
    unprof, prof, traces = [], [], []
    for rep in range(reps):
        unprof.append(_timed(fn, n))
        t, tr = _profiled(fn, n, root / f"{fn.__name__}-{len(list(root.iterdir()))}-{rep}", options)
        prof.append(t)
        traces.append(tr)
    return statistics.median(unprof), statistics.median(prof), traces


def _split(total_ns: float, inside_ns: float) -> dict[str, float]:
    inside = max(0.0, min(inside_ns, total_ns))
    return {"inside": inside, "outside": max(total_ns - inside, 0.0), "total": total_ns}


def measure_scope(n: int, reps: int, root: Path, options: dict[str, Any]) -> dict[str, float]:
    """Per scope (enter + exit): total cost, and the part the analyzer puts inside the scope."""
    u, p, traces = _differential(_scope_loop, n, reps, root, options)
    inside = statistics.median(s["operations"][INNER.name]["exclusive_s"] * 1e9 / n for _, s in traces)
    return _split((p - u) / n, inside)


def measure_category(n: int, reps: int, root: Path) -> dict[str, float]:
    """Per simulator/category boundary pair (``rlscope.simulator``, ``wrap_env``)."""
    u, p, traces = _differential(_category_loop, n, reps, root, {})
    inside = statistics.median(
        s["operations"][OUTER.name]["categories"].get("simulator", 0.0) * 1e9 / n for _, s in traces
    )
    return _split((p - u) / n, inside)


def measure_writer(n: int, reps: int, root: Path) -> dict[str, float]:
    """The trace writer's stall per event row: the scope loop with frequent flushes minus without."""
    interval = 0.05
    with_flush, without = [], []
    _scope_loop(n // 10)
    for rep in range(reps):
        for opts, out in (
            ({"flush_interval": interval}, with_flush),
            ({"flush_interval": NO_FLUSH}, without),
        ):
            with rlscope.profile(root / f"writer-{rep}-{len(out)}", backend=False, gpu=False, **opts):
                out.append(_timed(_scope_loop, n))
    t = statistics.median(with_flush)
    flushed = 2 * n * max(0.0, 1.0 - interval / 2 / (t / 1e9))  # the last partial interval is not timed
    per_event = max((t - statistics.median(without)) / flushed, 0.0) if flushed else 0.0
    return {"per_event": per_event}


def _rl_loop(torch: Any) -> Callable[[int], None]:
    """A synthetic actor-critic loop (not one of the validation workloads): the kinds of torch calls RL
    code makes -- tiny MLPs, a Categorical's sample/log_prob/entropy, a loss, backward, gradient
    clipping, Adam -- between numpy "environment" steps."""
    import numpy as np
    from torch.distributions import Categorical

    torch.manual_seed(0)

    def mlp(out: int) -> Any:
        layers = [torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh()]
        return torch.nn.Sequential(*layers, torch.nn.Linear(64, out))

    actor, critic = mlp(2), mlp(1)
    params = [*actor.parameters(), *critic.parameters()]
    opt = torch.optim.Adam(params, lr=1e-4, eps=1e-5)
    start = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)

    def env_step(obs: Any, action: Any) -> tuple[Any, Any]:
        return (obs * 0.99 + 0.01 * action[:, None]).astype(np.float32), np.ones(4, np.float32)

    def loop(n: int) -> None:
        obs = start
        with OUTER:
            for i in range(n):
                with torch.no_grad():
                    x = torch.as_tensor(obs)
                    a = Categorical(logits=actor(x)).sample()
                    critic(x).flatten()
                obs, r = env_step(obs, a.numpy())
                if i % 4 == 3:
                    x = torch.as_tensor(obs)
                    dist = Categorical(logits=actor(x))
                    ret = torch.as_tensor(r)
                    loss = -(dist.log_prob(a) * ret).mean() - 0.01 * dist.entropy().mean()
                    loss = loss + 0.5 * (critic(x).view(-1) - ret).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(params, 0.5)
                    opt.step()

    return loop


def measure_backend(torch: Any, n: int, reps: int, root: Path) -> dict[str, float]:
    """Per recorded torch call: the RL loop with backend recording minus without (scopes alone).

    The inside part is the backend time the analyzer sees beyond what the loop's torch calls take
    unprofiled; that needs the calls' unprofiled time, which the loop has no way to isolate, so it
    comes from a loop of single calls timed both ways (``_inside_backend``).
    """
    loop = _rl_loop(torch)
    loop(max(n // 10, 1))
    off, on, counts = [], [], []
    for rep in range(reps):
        with rlscope.profile(root / f"backend-{rep}-off", flush_interval=NO_FLUSH, backend=False, gpu=False):
            off.append(_timed(loop, n))
        path = root / f"backend-{rep}-on"
        with rlscope.profile(path, flush_interval=NO_FLUSH, backend=True, gpu=False):
            on.append(_timed(loop, n))
        counts.append(_count_backend(rlscope.load_trace(str(path))))
    calls = statistics.median(counts)
    total = (statistics.median(on) - statistics.median(off)) / calls
    out = _split(total, _inside_backend(torch, reps, root))
    out["calls_per_iteration"] = calls / n
    return out


def _inside_backend(torch: Any, reps: int, root: Path) -> float:
    """The part of a recorded call's cost inside its backend interval, from single small calls."""
    x = torch.ones(4, 64)

    def calls(n: int) -> None:
        with OUTER:
            for _ in range(n):
                torch.tanh(x)

    n = 5000
    u, _, traces = _differential(calls, n, reps, root, {"backend": True})
    seen = statistics.median(
        s["operations"][OUTER.name]["categories"].get("backend", 0.0) * 1e9 for _, s in traces
    )
    return max((seen - u) / n, 0.0)


def _count_backend(trace: Any) -> int:
    import pyarrow.compute as pc

    from rlscope import categories
    from rlscope.trace import schema as S

    ev = trace.processes[0].events
    mask = pc.and_(pc.equal(ev.column("kind"), S.CAT_BEGIN), pc.equal(ev.column("id"), categories.BACKEND))
    return int(pc.sum(mask).as_py() or 0)


def measure_cuda_api(torch: Any, n: int, reps: int, root: Path, collector: str) -> dict[str, float]:
    """Per CUDA API call under a GPU collector: one kernel launch per iteration, traced vs not.

    CUPTI's cost cannot be split by the analyzer (it has no untraced API time to compare with), so
    it is put inside the call, up to 80% of the calls' mean traced duration; the rest outside.
    """
    from rlscope.analysis import gpu as gpu_an

    x = torch.zeros(16, device="cuda")

    def launches(k: int) -> None:
        state = [1]
        with OUTER:
            for _ in range(k):
                _work(state)
                x.add_(1.0)
            torch.cuda.synchronize()

    launches(n // 10)
    traced, untraced, api_n, api_ns = [], [], [], []
    for rep in range(reps):
        with rlscope.profile(root / f"api-{collector}-{rep}-u", backend=False, gpu=False):
            untraced.append(_timed(launches, n))
        path = root / f"api-{collector}-{rep}-t"
        with rlscope.profile(path, backend=False, gpu=collector, nvml_hz=0, nvtx=False):
            traced.append(_timed(launches, n))
        proc = rlscope.load_trace(str(path)).processes[0]
        if proc.gpu is None or proc.metadata.get("gpu.collector") != _collector_name(collector):
            raise RuntimeError(f"GPU collector {collector} did not record")
        ts = proc.events.column("ts_ns").to_numpy()
        api, _ = gpu_an.split(proc.gpu, int(ts.min()), int(ts.max()))
        t, s, e = gpu_an.union_per_thread(api.thread, api.start, api.end)
        api_n.append(len(t))
        api_ns.append(float((e - s).sum()))
    calls = statistics.median(api_n)
    total = (statistics.median(traced) - statistics.median(untraced)) / calls
    mean_dur = statistics.median(api_ns) / calls
    out = _split(total, min(total, 0.8 * mean_dur))
    out["traced_call_mean_ns"] = mean_dur
    out["calls_per_iteration"] = calls / n
    return out


def _collector_name(mode: str) -> str:
    return {"auto": "native", "cupti": "native"}.get(mode, mode)


def measure_nvml(reps: int, root: Path) -> dict[str, float]:
    """The NVML sampler's stall per sample: a Python loop with the sampler at 200 Hz vs without."""

    def spin(n: int) -> None:
        state = [1]
        for _ in range(n):
            _work(state)

    n = 1_500_000
    on, off, samples = [], [], []
    spin(n // 10)
    for rep in range(reps):
        with rlscope.profile(root / f"nvml-{rep}-off", backend=False, gpu=False):
            off.append(_timed(spin, n))
        path = root / f"nvml-{rep}-on"
        with rlscope.profile(path, backend=False, gpu="auto", nvml_hz=200.0):
            on.append(_timed(spin, n))
        nv = rlscope.load_trace(str(path)).processes[0].nvml
        samples.append(nv.num_rows if nv is not None else 0)
    k = statistics.median(samples)
    if not k:
        raise RuntimeError("NVML recorded no samples")
    return {"per_sample": max((statistics.median(on) - statistics.median(off)) / k, 0.0)}


def run_calibration(
    reps: int = 5, scale: float = 1.0, gpu: bool = True, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Measure every event cost; returns the calibration dict (``rlscope.calibration`` schema)."""
    t0 = time.perf_counter()
    n = max(int(100_000 * scale), 1000)
    costs: dict[str, dict[str, float]] = {}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="rlscope-calibrate-") as tmp:
        root = Path(tmp)
        log("scopes ...")
        costs["scope"] = measure_scope(n, reps, root, {})
        log("simulator/category boundaries ...")
        costs["category"] = measure_category(n, reps, root)
        log("trace writer ...")
        costs["writer"] = measure_writer(3 * n, max(reps // 2, 2), root)
        torch = _import_torch()
        if torch is None:
            skipped["backend"] = "torch is not installed"
        else:
            log("backend-op recording ...")
            costs["backend"] = measure_backend(torch, max(n // 100, 50), reps, root)
        cuda = torch is not None and gpu and torch.cuda.is_available()
        if not cuda:
            why = "no CUDA GPU" if gpu else "--no-gpu"
            for kind in ("scope_nvtx", "cuda_api.native", "cuda_api.kineto", "nvml"):
                skipped[kind] = why
        else:
            log("scopes with NVTX ranges ...")
            costs["scope_nvtx"] = measure_scope(n, reps, root, {"gpu": "auto", "nvml_hz": 0})
            for mode in ("cupti", "kineto"):
                log(f"CUDA API calls under the {_collector_name(mode)} collector ...")
                try:
                    costs[f"cuda_api.{_collector_name(mode)}"] = measure_cuda_api(
                        torch, max(n // 5, 100), reps, root, mode
                    )
                except Exception as e:  # a collector that cannot run here is not calibrated
                    skipped[f"cuda_api.{_collector_name(mode)}"] = f"{type(e).__name__}: {e}"
            log("NVML sampler ...")
            try:
                costs["nvml"] = measure_nvml(max(reps // 2, 2), root)
            except Exception as e:
                skipped["nvml"] = f"{type(e).__name__}: {e}"
    return {
        "schema": cal_mod.SCHEMA,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - t0, 1),
        "key": cal_mod.current_key(),
        "method": "differential micro-workloads, split inside/outside by the analyzer (docs/overhead.md)",
        "reps": reps,
        "costs_ns": {k: {f: round(v, 1) for f, v in c.items()} for k, c in costs.items()},
        "skipped": skipped,
    }


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch
