"""SB3 PPO in one process, alternating with and without rlscope: the checks separate runs cannot make.

    python benchmarks/in_process_ab.py [--part train|learn|light|probe|engine|summary|gpu_ops|all] [--reps 8]
                                       [--device cpu|cuda] [--json FILE]

Separate processes draw their cores' speeds (±10-30% on the machines measured), so
``rlscope validate``'s plain regime compares the host as much as rlscope. Here every comparison is
between neighbours in one process, a few seconds apart (``pip install -e ".[bench]"``; one torch
thread; ``--device cuda`` puts the policy on the GPU and profiles with GPU tracing):

- ``train``: SB3 PPO's ``train()`` (SB3's defaults: 4 envs x 2048 steps, 10 epochs of 64-sample
  minibatches) unprofiled, under ``rlscope.profile``, unprofiled again. The session's corrected
  ``train`` over the mean of its two neighbours is the correction's error; its wall over it the raw
  slowdown.
- ``learn``: whole ``learn()`` stretches of 4,096 steps (256 steps x 4 envs per rollout, annotated
  as ``benchmarks/thirdparty/sb3_ppo.py`` is, the plain-regime row of BENCHMARKS.md) alternating
  unprofiled and under ``rlscope.profile``: the corrected wall and ``train`` / ``collect_rollouts``
  over their unprofiled neighbours.
- ``light``: ``train()`` (2 epochs of 512 x 4 steps) under a session held in its light state and in
  its full state, against the unprofiled call, in shuffled order: the light state's own cost (which
  the windows cannot see: it is their reference) and the full state's.
- ``probe``: ``rlscope validate``'s speed probe (:mod:`rlscope.overhead.validate.speed_probe`)
  sampling ``learn()`` stretches with and without a session: the probe's reading under a session
  over its reading without one. The same core's speed should read the same; a ratio below 1 makes
  validate's adjusted errors lean positive by about as much. The same ratio is also given from the
  samples taken in the session's light windows only, and in its full windows only.

- ``engine``: a torch update loop (a 64-64 MLP, batch 64, Adam) under a session held light, and the
  same with torch's own ``torch.autograd._engine_run_backward`` put back for the stretch, each between
  two stretches without a session (four alternations per ``--reps``): what a light session costs a
  step, and what of it the wrappers around the autograd engine's entry cost
  (rlscope/runtime/autograd_engine.py). Their rows carry no cost the correction removes, and the
  windows cannot see a light window's cost.
- ``summary``: ``learn()`` stretches of 4,096 steps of an unannotated SB3 PPO, alternating
  unprofiled and profiled as ``rlscope run`` profiles it (automatic operations, stack samples) with
  no detail stretch: every figure comes from the aggregates and the correction of the time between
  detail stretches (rlscope/analysis/whole_run.py), the part of a long run's profile no window
  measures. The corrected wall over the unprofiled stretches beside it; and the same without the
  backend recorder, and without the automatic operations too: what each leaves uncorrected
  (``--sessions`` adds ``no_gpu``, no GPU tracing, and ``bare``, nothing but the session's scopes).
- ``gpu_ops`` (``--device cuda`` only): a small GPU op's time under a session between detail
  stretches, with GPU collection on (CUPTI detached), without NVML, and off, over the stretches
  without a session beside it: what GPU collection leaves on every launch.

Each part prints the median ratio and its [min, max] over the repetitions.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import rlscope

sys.path.insert(0, str(Path(__file__).parent / "thirdparty"))
from sb3_ppo import annotate  # the row's annotations: one definition


def _model(device: str, n_steps: int = 2048, n_epochs: int = 10, wrap: bool = False) -> Any:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import Logger

    torch.set_num_threads(1)
    env = make_vec_env("CartPole-v1", n_envs=4, seed=1, wrapper_class=rlscope.wrap_env if wrap else None)
    model = PPO("MlpPolicy", env, n_steps=n_steps, n_epochs=n_epochs, seed=1, device=device, verbose=0)
    model.set_logger(Logger(None, []))
    return model


def _gpu(device: str) -> str | bool:
    """The session's GPU tracing: rlscope's default on the GPU, none on the CPU."""
    return "auto" if device == "cuda" else False


def _held(trace: Path, device: str, full: bool) -> Any:
    """A started session held in one state: its windows never switch, its expensive collectors on
    (``full``) or off (light)."""
    sess = rlscope.profile(trace, gpu=_gpu(device)).start()
    sess.windows.stop()
    for col in sess.windows.togglers:
        col.set_enabled(full)
    return sess


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def part_train(reps: int, tmp: Path, device: str) -> dict[str, Any]:
    """Corrected ``train`` under a session over the unprofiled calls on either side of it."""
    from rlscope.analysis import analyze

    model = _model(device)
    model.learn(total_timesteps=8192)  # a filled rollout buffer; train() re-trains on it
    train = rlscope.scope("train")(model.train)

    def unprofiled() -> float:
        t0 = time.perf_counter()
        train()
        return time.perf_counter() - t0

    def profiled(k: int) -> tuple[float, float]:
        trace = tmp / f"train-{k}"
        shutil.rmtree(trace, ignore_errors=True)
        with rlscope.profile(trace, gpu=_gpu(device)):
            t0 = time.perf_counter()
            train()
            wall = time.perf_counter() - t0
        summary = analyze(rlscope.load_trace(str(trace))).summary
        return wall, summary["operations"]["train"]["total_s"]

    unprofiled(), profiled(-1)  # warm: the first calls of each kind
    errors, slowdowns = [], []
    for k in range(reps):
        before = unprofiled()
        wall, corrected = profiled(k)
        ref = (before + unprofiled()) / 2
        errors.append(corrected / ref - 1)
        slowdowns.append(wall / ref)
        print(f"train {k + 1}/{reps}: corrected {errors[-1]:+.1%}, raw x{slowdowns[-1]:.3f}", flush=True)
    return {"corrected_error": _spread(errors), "raw_slowdown": _spread(slowdowns)}


def part_learn(reps: int, tmp: Path, device: str) -> dict[str, Any]:
    """Corrected ``learn()`` wall and operations under a session over the unprofiled stretches beside it."""
    from rlscope.analysis import analyze

    model = _model(device, n_steps=256, wrap=True)
    annotate(model)
    ops = ("train", "collect_rollouts")
    spent = dict.fromkeys(ops, 0.0)

    def timed(name: str, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - t0

        return call

    for name in ops:  # outside the scopes: the same wrapper in both kinds of stretch
        setattr(model, name, timed(name, getattr(model, name)))

    def stretch() -> dict[str, float]:
        spent.update(dict.fromkeys(ops, 0.0))
        t0 = time.perf_counter()
        model.learn(total_timesteps=4096, reset_num_timesteps=False)
        return {"[total]": time.perf_counter() - t0, **spent}

    def profiled(k: int) -> tuple[dict[str, float], dict[str, float]]:
        trace = tmp / f"learn-{k}"
        shutil.rmtree(trace, ignore_errors=True)
        with rlscope.profile(trace, gpu=_gpu(device)):
            raw = stretch()
        summary = analyze(rlscope.load_trace(str(trace))).summary
        corrected = {"[total]": summary["wall_s"]}
        corrected.update({op: summary["operations"][op]["total_s"] for op in ops})
        return raw, corrected

    stretch(), profiled(-1)  # warm: the first stretches of each kind
    errors: dict[str, list[float]] = {op: [] for op in ("[total]", *ops)}
    slowdowns = []
    before = stretch()
    for k in range(reps):
        raw, corrected = profiled(k)
        after = stretch()
        ref = {op: (before[op] + after[op]) / 2 for op in errors}
        for op in errors:
            errors[op].append(corrected[op] / ref[op] - 1)
        slowdowns.append(raw["[total]"] / ref["[total]"])
        line = ", ".join(f"{op} {e[-1]:+.1%}" for op, e in errors.items())
        print(f"learn {k + 1}/{reps}: corrected {line}; raw x{slowdowns[-1]:.3f}", flush=True)
        before = after
    names = {op: "corrected_error" + ("" if op == "[total]" else f".{op}") for op in errors}
    figures = {names[op]: _spread(e) for op, e in errors.items()}
    return {**figures, "raw_slowdown": _spread(slowdowns)}


def part_light(reps: int, tmp: Path, device: str) -> dict[str, Any]:
    """``train()`` under a session held light, and held full, over the unprofiled call.

    Timed in the main thread's CPU time on the CPU (other jobs on a small machine do not enter), in
    wall time on the GPU (waits for the device are part of what a state can cost)."""

    model = _model(device, n_steps=512, n_epochs=2)
    clock = time.thread_time_ns if device == "cpu" else time.perf_counter_ns
    model.learn(total_timesteps=2048)

    def timed(mode: str) -> int:
        sess = None if mode == "none" else _held(tmp / f"light-{mode}", device, full=mode == "full")
        t0 = clock()
        model.train()
        spent = clock() - t0
        if sess is not None:
            sess.stop()
        return spent

    for mode in ("none", "light", "full"):
        timed(mode)
    times: dict[str, list[int]] = {"none": [], "light": [], "full": []}
    rng = random.Random(0)
    for _ in range(reps):
        order = list(times)
        rng.shuffle(order)
        for mode in order:
            times[mode].append(timed(mode))
    return {
        f"{mode}_over_unprofiled": _spread([a / b for a, b in zip(times[mode], times["none"], strict=True)])
        for mode in ("light", "full")
    }


def part_probe(reps: int, tmp: Path, device: str) -> dict[str, Any]:
    """The speed probe's level in ``learn()`` stretches under a session over its level without one;
    and the same with only the samples taken in the session's light windows, and in its full ones.

    Why the split: if the probe read differently under a session only where the expensive
    collectors are on, validate could take its speeds from the light windows alone."""
    from rlscope.overhead.validate.speed_probe import SpeedProbe
    from rlscope.overhead.validate.window_speed import window_spans
    from rlscope.trace import schema as S

    model = _model(device, n_steps=512, wrap=True)
    annotate(model)
    probe = SpeedProbe()
    if not probe.start():
        raise SystemExit("in_process_ab: SIGALRM is in use; the probe cannot run")
    ratios: dict[str, list[float]] = {"session": [], "light": [], "full": []}
    try:
        model.learn(total_timesteps=4096)
        for k in range(reps):
            spans: dict[str, tuple[int, int]] = {}
            for mode in ("none", "session") if k % 2 else ("session", "none"):
                t0 = probe.clock()
                if mode == "session":
                    with rlscope.profile(tmp / f"probe-{k}", gpu=_gpu(device)):
                        model.learn(total_timesteps=4096, reset_num_timesteps=False)
                else:
                    model.learn(total_timesteps=4096, reset_num_timesteps=False)
                spans[mode] = (t0, probe.clock())
            off = probe.level([spans["none"]])
            windows = window_spans(tmp / f"probe-{k}", end=spans["session"][1])
            picks = {
                "session": [spans["session"]],
                "light": windows[S.WINDOW_LIGHT],
                "full": windows[S.WINDOW_FULL],
            }
            for name, regions in picks.items():
                on = probe.level(regions) if regions else None  # no such window: no reading
                if on and off:
                    ratios[name].append(on["ns_per_iteration"] / off["ns_per_iteration"])
    finally:
        probe.stop()
    out = {"session_over_none": _spread(ratios["session"])}
    out.update({f"{k}_windows_over_none": _spread(v) for k, v in ratios.items() if k != "session" and v})
    return out


def part_engine(reps: int, tmp: Path, device: str) -> dict[str, Any]:
    """Microseconds a step that a session held light adds to a torch update loop, with and without
    the wrappers around the autograd engine's entry, over the stretches without a session on either
    side; and the wrappers' share (the two, paired by alternation). CPU time of the main thread on
    the CPU, wall time on the GPU (as ``light``)."""
    import torch

    from rlscope.runtime import autograd_engine

    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(4, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 2),
    ).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-4)
    x, y = torch.randn(64, 4, device=device), torch.randn(64, 2, device=device)
    clock = time.thread_time_ns if device == "cpu" else time.perf_counter_ns
    steps = 150

    def step() -> None:
        loss = ((net(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    def stretch(mode: str) -> float:
        sess = None if mode == "none" else _held(tmp / f"engine-{mode}", device, full=False)
        wrapped = torch.autograd._engine_run_backward
        if mode == "bare":  # torch's own entry for the stretch: no wrapper runs
            inner = wrapped
            while getattr(inner, autograd_engine.MARK, None) is not None:
                inner = inner.__wrapped__
            torch.autograd._engine_run_backward = inner
        for _ in range(20):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = clock()
        for _ in range(steps):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
        spent = (clock() - t0) / steps / 1e3
        torch.autograd._engine_run_backward = wrapped
        if sess is not None:
            sess.stop()
        return spent

    for mode in ("none", "light", "bare"):
        stretch(mode)
    added: dict[str, list[float]] = {"light": [], "bare": []}
    base: list[float] = []
    rng = random.Random(0)
    for _ in range(4 * reps):
        order = list(added)
        rng.shuffle(order)
        for mode in order:
            a, b, c = stretch("none"), stretch(mode), stretch("none")
            added[mode].append(b - (a + c) / 2)
            base.append((a + c) / 2)
    wrappers = [a - b for a, b in zip(added["light"], added["bare"], strict=True)]
    return {
        "step_us": _spread(base),
        "light_added_us": _spread(added["light"]),
        "light_without_engine_wrappers_added_us": _spread(added["bare"]),
        "engine_wrappers_us": _spread(wrappers),
    }


# the sessions of the gpu_ops part: GPU collection as between detail stretches (CUPTI detached),
# with and without the NVML sampler, and none; nothing else of rlscope on
GPU_OPS_SESSIONS: dict[str, dict[str, Any]] = {
    "gpu": {"gpu": "auto"},
    "gpu_no_nvml": {"gpu": "auto", "nvml_hz": 0},
    "no_gpu": {"gpu": False},
}


def part_gpu_ops(reps: int, tmp: Path, device: str) -> dict[str, Any]:
    """Microseconds a small GPU op (a 64-64 ``F.linear``, no module call, no grad) takes under a
    session between detail stretches (:data:`GPU_OPS_SESSIONS`) over the stretches without a session
    on either side: what GPU collection leaves on every launch while detached, which no window sees.
    Here CUDA is initialized before any session; ``cupti_cost.py`` measures it initialized inside one."""
    import torch

    if device != "cuda":
        raise SystemExit("gpu_ops: needs --device cuda")
    torch.set_num_threads(1)
    lin = torch.nn.Linear(64, 64).to(device)
    x = torch.randn(8, 64, device=device)
    n = 20_000

    def timed() -> float:
        with torch.no_grad():
            for _ in range(500):
                lin.forward(x)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                lin.forward(x)
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) / n * 1e6

    def stretch(variant: str) -> float:
        trace = tmp / f"gpu-ops-{variant}"
        shutil.rmtree(trace, ignore_errors=True)
        options = {"backend": False, "auto_ops": False, "stack_hz": 0, "detail": SUMMARY_ONLY}
        with rlscope.profile(trace, **{**options, **GPU_OPS_SESSIONS[variant]}):
            time.sleep(SUMMARY_WAIT_S)
            return timed()

    timed(), [stretch(v) for v in GPU_OPS_SESSIONS]  # warm: each kind's first stretch
    added: dict[str, list[float]] = {v: [] for v in GPU_OPS_SESSIONS}
    base: list[float] = []
    rng = random.Random(0)
    before = timed()
    for _ in range(reps):
        order = list(GPU_OPS_SESSIONS)
        rng.shuffle(order)
        for variant in order:
            during = stretch(variant)
            after = timed()
            added[variant].append(during - (before + after) / 2)
            base.append((before + after) / 2)
            before = after
    return {"op_us": _spread(base), **{f"{v}_added_us": _spread(a) for v, a in added.items()}}


# a detail schedule whose first stretch is over before the measured stretch starts, and whose next
# one never comes: the session records aggregates only (rlscope/trace/detail.py)
SUMMARY_ONLY = "1ms,1000h,1ms"
SUMMARY_WAIT_S = 0.01  # slept at the session's start, past that first stretch; not the stretch's time


# the sessions of the summary part: as ``rlscope run`` profiles, then without the backend recorder,
# then without the automatic operations too: what each leaves in the corrected figure; on a GPU also
# without GPU tracing, and with nothing but the session's scopes (``--sessions``)
SUMMARY_SESSIONS: dict[str, dict[str, Any]] = {
    "": {},
    ".no_backend": {"backend": False},
    ".no_auto_ops": {"backend": False, "auto_ops": False},
    ".no_gpu": {"gpu": False},
    ".bare": {"backend": False, "auto_ops": False, "gpu": False, "stack_hz": 0},
}
SUMMARY_DEFAULT = ("", ".no_backend", ".no_auto_ops")


def part_summary(
    reps: int, tmp: Path, device: str, sessions: tuple[str, ...] = SUMMARY_DEFAULT
) -> dict[str, Any]:
    """Corrected ``learn()`` wall of an unannotated SB3 PPO, profiled as ``rlscope run`` does but from
    the aggregates alone, over the unprofiled stretches beside it; and the same in the other
    ``sessions`` (:data:`SUMMARY_SESSIONS`, interleaved)."""
    from rlscope.analysis import analyze

    model = _model(device, n_steps=256)

    def stretch() -> float:
        t0 = time.perf_counter()
        model.learn(total_timesteps=4096, reset_num_timesteps=False)
        return time.perf_counter() - t0

    def profiled(k: int, variant: str) -> tuple[float, float]:
        trace = tmp / f"summary-{k}{variant}"
        shutil.rmtree(trace, ignore_errors=True)
        options = {"gpu": _gpu(device), "auto_ops": True, "stack_hz": 100, "detail": SUMMARY_ONLY}
        with rlscope.profile(trace, **{**options, **SUMMARY_SESSIONS[variant]}):
            time.sleep(SUMMARY_WAIT_S)
            raw = stretch()
        summary = analyze(rlscope.load_trace(str(trace))).summary
        if summary["detail"]["detail_s"] > 0.05:
            raise SystemExit(f"summary: {summary['detail']['detail_s']:.2f} s of detail kept, expected none")
        return raw, summary["wall_s"] - SUMMARY_WAIT_S

    stretch(), profiled(-1, "")  # warm: the first stretches of each kind
    errors: dict[str, list[float]] = {v: [] for v in sessions}
    slowdowns: dict[str, list[float]] = {v: [] for v in sessions}
    before = stretch()
    for k in range(reps):
        for variant in sessions:
            raw, corrected = profiled(k, variant)
            after = stretch()
            ref = (before + after) / 2
            errors[variant].append(corrected / ref - 1)
            slowdowns[variant].append(raw / ref)
            print(
                f"summary{variant} {k + 1}/{reps}: corrected {errors[variant][-1]:+.1%};"
                f" raw x{slowdowns[variant][-1]:.3f}",
                flush=True,
            )
            before = after
    out: dict[str, Any] = {}
    for v in sessions:
        out[f"corrected_error{v}"] = _spread(errors[v])
        out[f"raw_slowdown{v}"] = _spread(slowdowns[v])
    return out


PARTS = {
    "train": part_train,
    "learn": part_learn,
    "light": part_light,
    "probe": part_probe,
    "engine": part_engine,
    "summary": part_summary,
    "gpu_ops": part_gpu_ops,
}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--part", choices=[*PARTS, "all"], default="all")
    p.add_argument("--reps", type=int, default=8, help="alternations per part (default 8)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--json", help="write the figures here")
    p.add_argument(
        "--sessions",
        default=",".join(v.lstrip(".") or "run" for v in SUMMARY_DEFAULT),
        help="the summary part's sessions, comma-separated, of: "
        + ", ".join(v.lstrip(".") or "run" for v in SUMMARY_SESSIONS)
        + " (default: %(default)s)",
    )
    args = p.parse_args(argv)
    if args.reps < 1:
        p.error("--reps must be at least 1")
    sessions = tuple("" if v == "run" else f".{v}" for v in args.sessions.split(","))
    if unknown := [v.lstrip(".") for v in sessions if v not in SUMMARY_SESSIONS]:
        p.error(f"--sessions: unknown {', '.join(unknown)}")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            p.error("--device cuda: torch sees no GPU here")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="rlscope-ab-") as tmp:
        for name, part in PARTS.items():
            if args.part == name or (args.part == "all" and (name != "gpu_ops" or args.device == "cuda")):
                extra = {"sessions": sessions} if name == "summary" else {}
                results[name] = part(args.reps, Path(tmp), args.device, **extra)
                for figure, v in results[name].items():
                    spread = f"[{v['min']:.3f}, {v['max']:.3f}] ({v['n']})"
                    print(f"{name} {figure}: median {v['median']:.3f} {spread}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
