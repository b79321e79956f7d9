"""Does overhead correction recover the unprofiled run? Per workload, unprofiled vs profiled, interleaved.

    python benchmarks/overhead_validation.py [--workloads ppo_cpu,dqn,sim_eager,scopes,ppo_gpu]
        [--reps 3] [--quick] [--calibration FILE] [--json out.json]

Each repetition runs every workload three ways, in turn:

- **unprofiled**: no session; the wall time of the workload call is the ground truth for the total;
- **plain timers**: no session, and every ``rlscope.scope`` boundary replaced by a bare
  ``perf_counter_ns`` timer (about 60 ns per boundary, measured below), which gives each
  operation's unprofiled inclusive time;
- **profiled**: ``rlscope.profile`` with its defaults (backend ops recorded; GPU tracing when the
  workload uses the GPU), analyzed raw and corrected with the machine's calibration.

Reported, as medians over repetitions: the raw slowdown (profiled / unprofiled wall), the error of
the corrected total against the unprofiled wall, and for every operation above 5% of the run the
error of its corrected (and raw) inclusive time against the plain timers. Target: |error| <= 5%.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rlscope
from rlscope.analysis import analyze
from rlscope.annotate import _Scope
from rlscope.trace.schema import OP_BEGIN

SIGNIFICANT = 0.05  # operations above this share of the run are checked


class PlainTimers:
    """Replace scope boundaries by bare timers: each operation's inclusive time, unprofiled.

    Single-threaded workloads only. The clock is read last on enter and first on exit, so the
    timer's own cost stays outside the interval it measures.
    """

    def __init__(self) -> None:
        self.inclusive: dict[str, int] = defaultdict(int)
        self.nested: dict[str, int] = defaultdict(int)  # timed scopes inside each operation
        self.calls: dict[str, int] = defaultdict(int)
        self._saved: tuple[Any, Any] | None = None

    def truth(self, timer_ns: float) -> dict[str, float]:
        """Inclusive seconds per operation, less the cost of the timers nested inside it."""
        return {k: (v - self.nested[k] * timer_ns) / 1e9 for k, v in self.inclusive.items()}

    def __enter__(self) -> PlainTimers:
        clock = time.perf_counter_ns
        stack: list[tuple[str, int, int]] = []
        closed = [0]
        inclusive, calls, nested = self.inclusive, self.calls, self.nested
        plain_enter, plain_exit = _Scope.__enter__, _Scope.__exit__

        def enter(sc: _Scope) -> _Scope:
            if sc._begin != OP_BEGIN:  # phases are not timed
                return plain_enter(sc)
            stack.append((sc.name, closed[0], clock()))
            return sc

        def exit_(sc: _Scope, *exc: object) -> None:
            t = clock()
            if sc._begin != OP_BEGIN:
                return plain_exit(sc, *exc)
            name, n0, t0 = stack.pop()
            inclusive[name] += t - t0
            nested[name] += closed[0] - n0
            closed[0] += 1
            calls[name] += 1
            return None

        self._saved = (plain_enter, plain_exit)
        _Scope.__enter__, _Scope.__exit__ = enter, exit_  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._saved is not None
        _Scope.__enter__, _Scope.__exit__ = self._saved  # type: ignore[method-assign]


# ------------------------------------------------------------------------------------ workloads


def _ppo(device: str, steps: int) -> Callable[[], Any]:
    from rlscope.workloads import ppo_cartpole

    def run() -> Any:
        return ppo_cartpole.train(total_timesteps=steps, seed=1, device=device, eval_episodes=0)

    return run


def _dqn(steps: int) -> Callable[[], Any]:
    from rlscope.workloads import dqn_cartpole

    def run() -> Any:
        return dqn_cartpole.train(total_timesteps=steps, seed=1, device="cpu", learning_starts=steps // 10)

    return run


def _sim_eager(device: str, steps: int, num_envs: int = 16) -> Callable[[], Any]:
    """The simulator benchmark's eager torch backend at small N with a torch policy: launch-bound."""
    import torch

    from rlscope.workloads import cartpole as cp

    env = cp.make_vec("torch", num_envs, device=device)
    weight = torch.tensor([[0.0, 0.1], [0.0, 0.5], [0.0, 2.0], [0.0, 1.0]], device=device)

    def run() -> Any:
        obs, _ = env.reset(seed=0)
        total = torch.zeros((), device=device)
        for _ in range(steps):
            with rlscope.scope("policy"):
                action = (obs @ weight).argmax(dim=-1)
            with rlscope.scope("step"):
                obs, reward, _, _, _ = env.step(action)
            with rlscope.scope("stats"):
                total += reward.sum()
        return float(total)

    return run


def _scopes(iterations: int) -> Callable[[], Any]:
    """Scope-heavy pure Python: three scopes per ~10 us iteration (~300k scopes/s unprofiled)."""

    def run() -> Any:
        table: dict[int, int] = {}
        acc = 0
        for i in range(iterations):
            with rlscope.scope("iteration"):
                with rlscope.scope("compute"):
                    for j in range(40):
                        acc = (acc * 31 + j) & 0xFFFFFF
                with rlscope.scope("bookkeeping"):
                    table[i & 255] = acc
                    acc ^= len(table)
        return acc

    return run


def workloads(quick: bool, cuda: bool) -> dict[str, tuple[Callable[[], Any], dict[str, Any]]]:
    """name -> (run, profile options). Sizes give each unprofiled run about 1-4 s (quick: ~0.5 s)."""
    q = 4 if quick else 1
    out: dict[str, tuple[Callable[[], Any], dict[str, Any]]] = {
        "ppo_cpu": (_ppo("cpu", 4096 // q), {"gpu": False}),
        "dqn": (_dqn(6000 // q), {"gpu": False}),
        "sim_eager": (_sim_eager("cuda" if cuda else "cpu", 4000 // q), {"gpu": "auto" if cuda else False}),
        "scopes": (_scopes(200_000 // q), {"gpu": False}),
    }
    if cuda:
        out["ppo_gpu"] = (_ppo("cuda", 4096 // q), {"gpu": "auto"})
    return out


# ------------------------------------------------------------------------------------ harness


def _sync() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _timed(run: Callable[[], Any]) -> tuple[float, Any]:
    _sync()
    t0 = time.perf_counter_ns()
    result = run()
    _sync()
    return (time.perf_counter_ns() - t0) / 1e9, result


def validate(
    name: str,
    run: Callable[[], Any],
    variants: dict[str, dict[str, Any]],
    reps: int,
    root: Path,
    calibration: str | None,
    timer_ns: float,
) -> dict[str, Any]:
    """Interleave unprofiled, plain-timer and profiled runs (one per variant); compare corrected figures."""
    run()  # warm-up: imports, allocator, kernels compiled
    unprof: list[float] = []
    truth: list[dict[str, float]] = []
    results, profiled_results = [], []
    prof: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for rep in range(reps):
        t, r = _timed(run)
        unprof.append(t)
        results.append(r)
        with PlainTimers() as timers:
            _timed(run)
        truth.append(timers.truth(timer_ns))
        for variant, options in variants.items():
            path = root / f"{name}-{variant}-{rep}"
            with rlscope.profile(path, **options):
                _, r = _timed(run)
            profiled_results.append(r)
            prof[variant].append(analyze(path, calibration=calibration).summary)
    base = statistics.median(unprof)
    out: dict[str, Any] = {
        "unprofiled_s": unprof,
        "same_results": all(_same(results[0], b) for b in profiled_results),
        "variants": {},
    }
    for variant, summaries in prof.items():
        ops = {}
        for op in truth[0]:
            true_s = statistics.median(t.get(op, 0.0) for t in truth)
            if true_s < SIGNIFICANT * base:
                continue
            cor = statistics.median(s["operations"].get(op, {}).get("total_s", 0.0) for s in summaries)
            raw = statistics.median(s["raw"]["operations"].get(op, {}).get("total_s", 0.0) for s in summaries)
            ops[op] = {
                "share": true_s / base,
                "timer_s": true_s,
                "raw_s": raw,
                "corrected_s": cor,
                "raw_error": raw / true_s - 1,
                "error": cor / true_s - 1,
            }
        raw_wall = [s["raw"]["wall_s"] for s in summaries]
        cor_wall = [s["wall_s"] for s in summaries]
        last = summaries[-1]
        out["variants"][variant] = {
            "options": variants[variant],
            "profiled_raw_s": raw_wall,
            "corrected_s": cor_wall,
            "raw_slowdown": statistics.median(raw_wall) / base,
            "total_error": statistics.median(cor_wall) / base - 1,
            "operations": ops,
            "worst_op_error": max((abs(o["error"]) for o in ops.values()), default=0.0),
            "corrected": last.get("corrected_for_overhead", False),
            "calibration": last["calibration"].get("path") or last["calibration"].get("reason"),
            "removed_s": last.get("overhead", {}).get("removed_s", {}),
        }
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.get("episode_returns") == b.get("episode_returns")
    return a == b


def timer_cost_ns(n: int = 200_000) -> float:
    """What one plain-timer scope (enter + exit) costs, over an inactive rlscope scope."""
    sc = rlscope.scope("rlscope.validation.timer")

    def loop() -> float:
        t0 = time.perf_counter_ns()
        for _ in range(n):
            with sc:
                pass
        return (time.perf_counter_ns() - t0) / n

    plain = statistics.median(loop() for _ in range(5))
    with PlainTimers():
        timed = statistics.median(loop() for _ in range(5))
    return timed - plain


def render(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="overhead validation (medians)", title_justify="left", header_style="bold")
    for col in (
        "workload (profile)",
        "operation",
        "share",
        "raw slowdown / raw error",
        "corrected error",
        "ok",
    ):
        table.add_column(col, justify="left" if col in ("workload (profile)", "operation") else "right")

    def verdict(err: float) -> str:
        return "yes" if abs(err) <= 0.05 else "NO"

    for name, wl in result["workloads"].items():
        for variant, w in wl["variants"].items():
            err = w["total_error"]
            table.add_row(
                f"{name} ({variant})",
                "[total]",
                "100%",
                f"x{w['raw_slowdown']:.2f}",
                f"{err:+.1%}",
                verdict(err),
            )
            for op, o in w["operations"].items():
                share, raw, err = f"{o['share']:.0%}", f"{o['raw_error']:+.1%}", f"{o['error']:+.1%}"
                table.add_row("", op, share, raw, err, verdict(o["error"]))
            table.add_section()
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default=None, help="comma-separated (default: all that can run here)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="about 4x smaller workloads")
    p.add_argument("--calibration", default=None, help="calibration file (default: this machine's)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    import torch

    cuda = torch.cuda.is_available()
    table = workloads(args.quick, cuda)
    names = args.workloads.split(",") if args.workloads else list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        p.error(f"unknown or unavailable workload(s): {', '.join(unknown)} (have: {', '.join(table)})")
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "command": " ".join(["python", "benchmarks/overhead_validation.py", *(argv or sys.argv[1:])]),
        "plain_timer_cost_ns": timer_cost_ns(),
        "workloads": {},
    }
    with tempfile.TemporaryDirectory(prefix="rlscope-validation-") as tmp:
        for name in names:
            run, options = table[name]
            variants = {"default": options, "no backend ops": {**options, "backend": False}}
            print(f"validating {name} ...", file=sys.stderr, flush=True)
            result["workloads"][name] = validate(
                name, run, variants, args.reps, Path(tmp), args.calibration, result["plain_timer_cost_ns"]
            )
            if args.json:  # partial results survive a run cut short
                Path(args.json).write_text(json.dumps(result, indent=1))
    render(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
