"""What a collector state costs a loop, measured against a twin process on the same core, in lockstep.

    python benchmarks/lockstep.py [--cpu 2] [--aux-cpu 3] [--configs none,light,...] [--pairs 30]
                                  [--iters 60] [--rounds 2] [--loop sim_eager|ppo|dqn|sb3_ppo|sb3_sac]
                                  [--device cuda]
                                  [--json FILE] [--keep DIR] [--a-timers]

Why: on the devices a core runs at a speed the host sets (BENCHMARKS.md §9, fifteenth and sixteenth
sessions: 0.9-3.5 ms for the same iteration within a minute, per core, independently), so two
processes, or two halves of one process, compare the speeds they drew as much as the states they
ran in. Here two processes, A and
B, run the eager CartPole loop (`loops.sim_eager_step`: ~50 small launches an iteration; ``--loop
ppo``: the bundled PPO's iteration, `loops.ppo_step`, in blocks of a multiple of 128; ``dqn``;
``sb3_ppo`` / ``sb3_sac``: stable-baselines3, one ``learn`` call an iteration, ~0.05-0.2 s, so
``--iters 1``) with their
main threads pinned to the same core (``--cpu``; every other thread on ``--aux-cpu``) and take turns:
a block of ``--iters`` iterations and a synchronize in one, then in the other, ABBA. Both blocks of a
pair run within ~0.2 s on the same core, so the host's speed cancels in their ratio B/A.

Per configuration B is a fresh process; A, the pristine reference, serves every configuration and
never starts a session. ``--pairs`` pairs are timed with B pristine (the base ratio), then B enters
the configuration's state and ``--pairs`` more are timed (the state ratio); the cost of the state is
state / base. Configurations:

- ``none``: B enters nothing (the null: should read 1.000);
- ``control_once``: a session without GPU tracing, stopped before the blocks (what a stopped session
  leaves behind);
- ``cupti_once``: a session with GPU tracing (CUPTI attached, memory recorder off), stopped before the
  blocks: what CUPTI leaves in a process once it has been attached and detached (``cuptiFinalize``);
- ``light``: the default profile held in a light window (CUPTI detached, backend recorder off, the
  memory recorder, NVML sampling and the writer on): what a validation's light windows pay;
- ``light_cycled``: the same after 20 window switches (10 CUPTI attach/detach cycles);
- ``light_nomem`` / ``light_nonvml``: the light window without the memory recorder / NVML sampling;
- ``light_memoff``: the light window with the memory recorder attached but told to drop events (its
  flag, checked first in torch's call): what switching it in windows would leave;
- ``light_bare``: the light window without the memory recorder and NVML sampling;
- ``light_nogpu``: a session without GPU tracing at all (scopes, backend recorder off, no memory);
  ``light_nogpu_noflush``: the same with the writer flushing once a minute instead of once a second
  (what the writer's flushes cost the job's thread beside the rest of the session);
- ``keep``: the light window with CUPTI left attached, its kinds off (the positive control: +30%);
- ``full``: every collector on (no windows);
- ``cyclesN``: the light window after N more full/light window pairs (N more CUPTI attach/detach
  cycles; ``light`` is ``cycles0``, ``light_cycled`` ``cycles10``); ``nogpucyclesN``: the same in a
  session without GPU tracing (only the backend recorder switches); ``stopN``: the session stopped
  after N cycles; ``rawN``: no session, only the native CUPTI consumer attached and detached N times;
- ``flushN``: a session without GPU tracing or backend ops, held, whose writer gets N thousand
  GPU-activity rows a second built as the native CUPTI consumer builds them (``flush0``: none):
  what flushing GPU rows costs the job's thread, on any machine;
- ``busyN``: no session; N µs of busy-waiting added to each iteration: a known cost, so the
  benchmark's own answer can be checked (``expected`` in its row: N µs over B's iteration as A's
  blocks at the time put it; a fixed time costs more of a fast block than of a slow one).

Three configurations check the correction itself rather than a held state. ``default`` runs B's
state blocks under the default profile with its windows switching, then analyzes B's trace;
``default_nomem`` does so without the memory recorder, and ``default_noflush`` with the writer
flushing once a minute, so that no flush falls in a block (its corrected figure against
``default``'s says whether the flushes' removal, their own CPU time, is the stall they cost the
job). Every iteration runs in a scope ``iter`` (in A too,
where no session makes it a no-op), so B's corrected ``iter`` time per call is set against A's time
per iteration over the same pairs, divided by the base ratio: the corrected figure's error with the
host's speed and the two processes' own difference taken out. The raw ratio is reported beside it.

``--a-timers``: A's scopes feed plain timers (`rlscope validate`'s timer path: C boundaries that
stamp their own cost, tens of ns a scope, the same in the base and state phases), so the default
configurations' corrected figure is also set against A per operation (B's corrected ns a call over
A's timed ns a call over the same pairs, scaled to A's wall time, with the whole iteration's base
ratio, since pristine B has no per-operation times): which operation carries an error the ``iter``
figure shows.

A held light window (``light*``) is held for long calls too: a call longer than half a window
switches the window at its next entry (``Session.long_op_entry``), which flipped SB3's "held"
window at every iteration until the twenty-first session.

Reported per configuration: base and state ratios (median of the pairs, with quartiles), the cost
(state / base), and A's own block range, which shows how far the host's speed moved meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

CONFIGS = (
    "none",
    "control_once",
    "cupti_once",
    "light",
    "light_cycled",
    "light_nomem",
    "light_nonvml",
    "light_memoff",
    "light_bare",
    "light_nogpu",
    "light_nogpu_noflush",
    "keep",
    "full",
    "default",
    "default_nomem",
    "default_noflush",
)

NUMBERED = r"(cycles|nogpucycles|stop|raw|busy|flush)(\d+)"  # configurations with a count


def _known(config: str) -> bool:
    return config in CONFIGS or re.fullmatch(NUMBERED, config) is not None


def _raw_cycles(n: int, step: Any) -> None:
    """Attach and detach the native CUPTI consumer ``n`` times, a few iterations each way; no session."""
    import ctypes

    from rlscope.collectors import cupti_native as cn

    lib = ctypes.CDLL(str(cn.build()))
    lib.rl_start_kinds.argtypes = [ctypes.c_uint]
    lib.rl_set_enabled.argtypes = [ctypes.c_int]
    lib.rl_set_detach.argtypes = [ctypes.c_int]
    lib.rl_set_detach(1)
    for i in range(n):
        if i == 0:
            lib.rl_start_kinds(cn.kinds_mask())
        else:
            lib.rl_set_enabled(1)
        for _ in range(5):
            step()
        lib.rl_set_enabled(0)  # detached (cuptiFinalize)
        for _ in range(5):
            step()


def _keep(trace_dir: str, summary: dict, path: str) -> None:
    """The main thread's operation instances (name id, begin, end, exclusive ns), the window switches,
    the names and the summary, as one small .npz beside the pairs' block times."""
    import numpy as np
    from light_state import main_instances  # this script's directory

    from rlscope.trace import reader

    _, dirs, _ = reader.process_dirs(trace_dir)
    proc = reader.load_process(dirs[0])
    m = main_instances(proc)
    name = m.tl.inst_name[m.inst]
    names = sorted({int(n) for n in name})
    np.savez_compressed(
        path,
        name=name,
        begin=m.begin,
        end=m.end,
        excl=m.excl,
        win_ts=m.win_ts,
        win_mode=m.win_mode,
        names=np.array([reader.name_of(proc.names, n, str(n)) for n in names]),
        name_ids=np.array(names),
        summary=np.array(json.dumps(summary, default=str)),
    )


class _FakeGpuRows:
    """Hands the writer ``per_s`` GPU-activity rows a second of wall time, built as the native CUPTI
    consumer's flush builds them (numpy columns, one record batch, names mapped with np.unique):
    what a flush of GPU rows costs the job's thread, measurable without a GPU (``flushN``)."""

    def __init__(self, session: Any, per_s: int) -> None:
        import numpy as np

        from rlscope.collectors.cupti_native import ROW
        from rlscope.trace import schema as S

        self.np, self.row, self.per_s = np, ROW, per_s
        self.schema = S.columns_schema(S.GPU_COLUMNS_DOC + S.GPU_KERNEL_COLUMNS_DOC, "native", {})
        self.rows = session.writer.add_stream("fake_gpu.arrows", self.schema)
        self.last = time.monotonic()
        session.writer.before_flush(self.flush)

    def flush(self) -> None:
        import pyarrow as pa

        np = self.np
        now = time.monotonic()
        n, self.last = int(self.per_s * (now - self.last)), now
        if n <= 0:
            return
        buf = np.zeros(n, self.row)
        buf["start"] = np.arange(n)
        buf["end"] = buf["start"] + 5
        buf["name"] = np.arange(n) % 50
        _, inv = np.unique(buf["name"], return_inverse=True)
        cols = [buf["category"], buf["start"], buf["end"], buf["corr"], buf["thread"], buf["device"]]
        cols += [buf["stream"], inv.reshape(-1), buf["bytes"], *(buf["grid"][:, i] for i in range(3))]
        cols += [*(buf["block"][:, i] for i in range(3)), buf["registers"], buf["static_smem"]]
        cols += [buf["dynamic_smem"]]
        arrays = [
            pa.array(np.ascontiguousarray(c).astype(f.type.to_pandas_dtype(), copy=False), type=f.type)
            for c, f in zip(cols, self.schema, strict=True)
        ]
        self.rows.append(pa.RecordBatch.from_arrays(arrays, schema=self.schema))


def _hold(config: str, kind: str, cycles: int, session: Any, step: Any) -> None:
    """Bring a started session into ``config``'s state: used (torch's collectors join on first use,
    CUPTI gets used), ``cycles`` more window pairs, then stopped (``*_once``, ``stopN``), every
    collector on (``full``) or held in a light window; ``light_memoff`` tells the memory recorder to
    drop events."""
    import rlscope.session as rs

    for _ in range(20):
        step()
    for _ in range(2 * cycles):
        session.switch_window()
        for _ in range(5):
            step()
    if config.endswith("_once") or kind == "stop":
        session.stop()
        return
    if config != "full":
        if session._window_mode != rs.S.WINDOW_LIGHT:
            session.switch_window()
        session.window_due_ns = 1 << 62  # hold the light window
        # and let no call be a long one: a long call switches the window at its next entry
        # (Session.long_op_entry), so SB3's 150 ms `iter` flipped the "held" window every block
        session.long_op_ns = 1 << 62
        session.long_ops.clear()
    if config == "light_memoff":
        for col in session._collectors:
            if getattr(col, "native", None) is not None:
                col.native.mn_enable(0)


def _pin(main_cpu: int, aux_cpu: int) -> None:
    """The calling (main) thread on ``main_cpu``, every other thread of the process on ``aux_cpu``."""
    me = threading.get_native_id()
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(tid), {main_cpu} if int(tid) == me else {aux_cpu})


def child(device: str, loop: str, timers: bool = False) -> None:
    """Serve commands from the parent, one per line: pin, block, enter, leave, optimes, quit.

    ``timers``: the process's scopes feed plain timers (`rlscope validate`'s timer path, C boundaries
    that stamp their own cost), so ``optimes`` can say what each operation took (A, with
    ``--a-timers``: the per-operation truth the corrected figures of B are set against)."""
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import loops

    import rlscope

    steps = {
        "ppo": loops.ppo_step,
        "dqn": loops.dqn_step,
        "sim_eager": loops.sim_eager_step,
        "sb3_ppo": loops.sb3_ppo_step,
        "sb3_sac": loops.sb3_sac_step,
    }
    one = steps[loop](device)
    extra = [0]  # ns of busy-waiting added to each iteration (``busyN``: a known cost)

    def step() -> None:
        with rlscope.scope("iter"):
            one()
            if extra[0]:
                end = time.perf_counter_ns() + extra[0]
                while time.perf_counter_ns() < end:
                    pass

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    warm = loops.UPDATE_EVERY if loop == "ppo" else loops.SB3_WARM.get(loop, 50)  # ppo: a whole update cycle
    for _ in range(warm):
        step()
    sync()
    pins = (0, 0)
    session = None
    tmp = tempfile.mkdtemp(prefix="rlscope-lockstep-")
    timer_costs: dict[str, float] = {}
    if timers:
        from rlscope import annotate
        from rlscope.overhead.validate import aggregate as validate_aggregate
        from rlscope.overhead.validate import child as validate_child

        timer_costs = validate_child.measure_timer_costs()
        aggregate = validate_aggregate.TimerAggregate()
        record = validate_child.ChildRecord(None, "timers")
        timer_session = validate_child.TimerSession(tmp, record=record, aggregate=aggregate).start()
    print("ready", flush=True)
    for line in sys.stdin:
        cmd, *arg = line.split()
        if cmd == "pin":
            pins = (int(arg[0]), int(arg[1]))
            _pin(*pins)
            print("ok", flush=True)
        elif cmd == "block":
            n = int(arg[0])
            t0 = time.perf_counter_ns()
            for _ in range(n):
                step()
            sync()
            print(t0, time.perf_counter_ns(), flush=True)  # CLOCK_MONOTONIC: one clock for A and B
        elif cmd == "enter":
            config = arg[0]
            t0 = time.perf_counter_ns()
            m = re.fullmatch(NUMBERED, config)
            kind, cycles = (m.group(1), int(m.group(2))) if m else ("", 10 if config == "light_cycled" else 0)
            if kind == "busy":
                extra[0] = cycles * 1000
            elif kind == "raw":
                _raw_cycles(cycles, step)
            elif config != "none":
                nomem = config in ("light_nomem", "light_bare", "cupti_once", "default_nomem")
                os.environ["RLSCOPE_GPU_MEMORY"] = "0" if nomem else "1"
                os.environ["RLSCOPE_CUPTI_DETACH"] = "0" if config == "keep" else "1"
                opts: dict = {}
                if config == "control_once" or kind == "flush":
                    opts = {"gpu": False, "backend": False, "nvml_hz": 0}
                elif config == "cupti_once":
                    opts = {"gpu": "cupti", "backend": False, "nvml_hz": 0, "windows": False}
                elif config == "light_nogpu" or kind == "nogpucycles":
                    opts = {"gpu": False}
                elif config == "light_nogpu_noflush":  # the writer flushes once a minute, not a second
                    opts = {"gpu": False, "flush_interval": 60.0}
                elif config in ("light_nonvml", "light_bare"):
                    opts = {"nvml_hz": 0}
                elif config == "full":
                    opts = {"windows": False}
                elif config == "default_noflush":  # the default profile, the writer flushing once a minute
                    opts = {"flush_interval": 60.0}
                session = rlscope.profile(tmp, **opts).start()
                if kind == "flush" and cycles:
                    _FakeGpuRows(session, cycles * 1000)
                if not config.startswith("default"):  # default: the blocks run under the switching windows
                    _hold(config, kind, cycles, session, step)
                    if config.endswith("_once") or kind == "stop":
                        session = None  # stopped
                sync()
            _pin(*pins)  # the session's threads on the aux core, like the rest
            print(time.perf_counter_ns() - t0, flush=True)
        elif cmd == "leave":  # stop the session; its corrected and raw ``iter`` per call
            from rlscope.analysis import analyze

            assert session is not None
            session.stop()
            session = None
            summary = analyze(rlscope.load_trace(tmp)).summary
            if arg:  # keep what an offline look at the windows needs (the trace is too large)
                _keep(tmp, summary, arg[0])
            cor, raw = summary["operations"]["iter"], summary["raw"]["operations"]["iter"]
            ops = {  # every operation's corrected and raw inclusive ns per call
                k: [
                    v["total_s"] / v["calls"] * 1e9,
                    summary["raw"]["operations"][k]["total_s"] / v["calls"] * 1e9,
                ]
                for k, v in summary["operations"].items()
                if v.get("calls") and k in summary["raw"]["operations"]
            }
            print(
                json.dumps(
                    {
                        "corrected_ns": cor["total_s"] / cor["calls"] * 1e9,
                        "raw_ns": raw["total_s"] / raw["calls"] * 1e9,
                        "calls": cor["calls"],
                        "corrected": summary["corrected_for_overhead"],
                        "ops": ops,
                        # what the correction removed as the writer's flushes (default vs default_noflush)
                        "writer_s": summary.get("overhead", {}).get("removed_s", {}).get("writer", 0.0),
                    }
                ),
                flush=True,
            )
        elif cmd == "optimes":  # each operation's inclusive ns and calls so far, timers' cost out
            timer_session.drain()
            ops = validate_aggregate.corrected_timers(aggregate.counters(list(annotate._names)), timer_costs)
            print(json.dumps({k: [v["inclusive_s"] * 1e9, v["calls"]] for k, v in ops.items()}), flush=True)
        elif cmd == "quit":
            break
    if session is not None:
        session.stop()
    if timers:
        timer_session.stop()


def window_pairs(kept: str, spans: list, base_ratio: float) -> dict[str, list[float]]:
    """Each state pair's B/A over the base ratio, by the kind of window B's block lay wholly in
    (``light``, ``full``; ``mixed`` when a switch fell inside it), from a ``--keep`` table."""
    import numpy as np

    z = np.load(kept)
    win_ts, win_mode = z["win_ts"], z["win_mode"]
    out: dict[str, list[float]] = {"light": [], "full": [], "mixed": []}
    for a0, a1, b0, b1 in spans:
        i0 = int(np.searchsorted(win_ts, b0, side="right")) - 1
        i1 = int(np.searchsorted(win_ts, b1, side="right")) - 1
        kind = "mixed" if i0 != i1 or i0 < 0 else ("full" if win_mode[i0] == 1 else "light")
        out[kind].append((b1 - b0) / (a1 - a0) / base_ratio)
    return out


class Proc:
    """One child process, driven line by line."""

    def __init__(self, device: str, park: str, loop: str, timers: bool = False) -> None:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--device", device, "--loop", loop]
        cmd += ["--timers"] if timers else []
        self.p = subprocess.Popen(
            ["taskset", "-c", park, *cmd],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, line: str) -> str:
        assert self.p.stdin is not None and self.p.stdout is not None
        try:
            self.p.stdin.write(line + "\n")
            self.p.stdin.flush()
        except OSError:
            raise SystemExit(f"lockstep: a child process ended before {line.split()[0]!r}") from None
        got = self.p.stdout.readline().strip()
        if not got:
            raise SystemExit(f"lockstep: a child process ended during {line.split()[0]!r} (its error above)")
        return got

    def wait_ready(self) -> None:
        assert self.p.stdout is not None
        got = self.p.stdout.readline().strip()
        if got != "ready":
            raise SystemExit(f"lockstep: a child did not start (got {got!r})")

    def close(self) -> None:
        assert self.p.stdin is not None
        with contextlib.suppress(OSError):  # the child is gone already
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
        self.p.wait(timeout=60)


def _pairs(a: Proc, b: Proc, pairs: int, iters: int, spans: list | None = None) -> list[tuple[int, int]]:
    """``pairs`` (A ns, B ns) block pairs, ABBA: each pair's order alternates. ``spans`` gets each
    pair's (A start, A end, B start, B end) on the shared monotonic clock."""
    out = []
    for i in range(pairs):
        if i % 2 == 0:
            a0, a1 = map(int, a.ask(f"block {iters}").split())
            b0, b1 = map(int, b.ask(f"block {iters}").split())
        else:
            b0, b1 = map(int, b.ask(f"block {iters}").split())
            a0, a1 = map(int, a.ask(f"block {iters}").split())
        out.append((a1 - a0, b1 - b0))
        if spans is not None:
            spans.append((a0, a1, b0, b1))
    return out


def _op_errors(
    b_ops: dict, a0: dict, a1: dict, a_iter_ns: float, base: float
) -> tuple[dict[str, tuple[float, float, float]], float]:
    """Per operation A timed over the state pairs (``a1 - a0``): B's corrected and raw error against
    it, and the operation's share of A's ``iter``; and the share of A's wall time its timers leave
    out.

    A's timers leave out their own time (each boundary's stamped cost, and the once-a-second fold
    of the events into totals, ~1-5% of a CPU loop's wall time, which the timers take off the open
    operations), while the base ratio and ``a_iter_ns`` (A's wall time an iteration) include it. So
    A's timed operations are scaled by A's wall iteration over its timed ``iter``: the fold lands
    in whichever operation is open, in proportion to its time. Then ``iter`` reads exactly the
    wall-based error, and the operations split it. The whole iteration's base ratio serves every
    operation (B pristine has no per-operation times)."""
    delta = {
        k: (ns1 - a0.get(k, [0.0, 0])[0], calls1 - a0.get(k, [0.0, 0])[1]) for k, (ns1, calls1) in a1.items()
    }
    iter_ns, iter_calls = delta["iter"]
    scale = a_iter_ns / (iter_ns / max(1, iter_calls))
    out = {}
    for name, (ns, calls) in delta.items():
        if name not in b_ops or calls <= 0:
            continue
        a_call = ns / calls * scale
        cor, raw = b_ops[name]
        out[name] = (cor / a_call / base - 1, raw / a_call / base - 1, ns / iter_ns)
    return out, 1 - 1 / scale


def _q(xs: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(xs, n=4)
    return q[0], statistics.median(xs), q[2]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--device", default="cuda", help="cuda, or cpu to check the wiring")
    p.add_argument("--cpu", type=int, default=2, help="the core both main threads run on")
    p.add_argument("--aux-cpu", type=int, default=3, help="the core every other thread runs on")
    p.add_argument("--park", default="8-15", help="cores the waiting children start on")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument(
        "--loop",
        default="sim_eager",
        choices=["sim_eager", "ppo", "dqn", "sb3_ppo", "sb3_sac"],
        help="sim_eager: the eager CartPole step; ppo: PPO's iteration (--iters: a multiple of 128); "
        "dqn: DQN's iteration once it learns (--iters: a multiple of 4); sb3_ppo / sb3_sac: one"
        " stable-baselines3 learn call (a PPO rollout and its update / 16 SAC steps; bench extras)",
    )
    p.add_argument("--pairs", type=int, default=30)
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", default=None)
    p.add_argument("--keep", default=None, help="folder for the default configurations' instance tables")
    p.add_argument(
        "--a-timers",
        action="store_true",
        help="A's scopes feed plain timers: the default configurations' corrected figure per operation",
    )
    p.add_argument("--timers", action="store_true", help=argparse.SUPPRESS)  # a child's
    args = p.parse_args()
    if args.child:
        child(args.device, args.loop, args.timers)
        return
    import loops  # this script's directory; torch only inside its step functions

    cycle = {"ppo": loops.UPDATE_EVERY, "dqn": loops.DQN_TRAIN_EVERY}.get(args.loop, 1)
    if args.iters % cycle:  # every block does the same work: whole update cycles
        raise SystemExit(
            f"lockstep: --loop {args.loop} needs --iters a multiple of {cycle} (a backprop every {cycle})"
        )
    configs = [c for c in args.configs.split(",") if c]
    bad = [c for c in configs if not _known(c)]
    if bad:
        known = ", ".join(CONFIGS) + ", cyclesN, nogpucyclesN, stopN, rawN, busyN, flushN"
        raise SystemExit(f"lockstep: unknown configuration(s) {', '.join(bad)}; known: {known}")
    os.sched_setaffinity(0, {0, 1})
    a = Proc(args.device, args.park, args.loop, args.a_timers)
    results: list[dict] = []
    for r in range(args.rounds):
        order = configs[r % len(configs) :] + configs[: r % len(configs)]
        bs = {c: Proc(args.device, args.park, args.loop) for c in order}  # started together, parked
        a.wait_ready()
        a.ask(f"pin {args.cpu} {args.aux_cpu}")
        for b in bs.values():
            b.wait_ready()
        for config in order:
            b = bs[config]
            b.ask(f"pin {args.cpu} {args.aux_cpu}")
            _pairs(a, b, 3, args.iters)  # both settle on the core
            base = _pairs(a, b, args.pairs, args.iters)
            enter_ns = int(b.ask(f"enter {config}"))
            session = config.startswith("default")
            if not session:
                _pairs(a, b, 3, args.iters)  # a switch's transient
            spans: list = []
            a_ops0 = json.loads(a.ask("optimes")) if args.a_timers else {}
            state = _pairs(a, b, args.pairs, args.iters, spans)
            a_ops1 = json.loads(a.ask("optimes")) if args.a_timers else {}
            keep = f" {args.keep}/lockstep-{config}-{r + 1}.npz" if args.keep else ""
            analysis = json.loads(b.ask("leave" + keep)) if session else None
            b.close()
            base_r = [tb / ta for ta, tb in base]
            state_r = [tb / ta for ta, tb in state]
            a_us = [ta / args.iters / 1e3 for ta, _ in base + state]
            row = {
                "round": r + 1,
                "config": config,
                "base_ratio": _q(base_r),
                "state_ratio": _q(state_r),
                "cost": statistics.median(state_r) / statistics.median(base_r),
                "a_us": (min(a_us), statistics.median(a_us), max(a_us)),
                "enter_ms": enter_ns / 1e6,
                "analysis": analysis,
                "spans": spans,
                "base": base,
                "state": state,
            }
            if config.startswith("busy"):
                # the known cost: a fixed time per iteration (not a fixed amount of work), so its share
                # of a pair follows A's block at the time: B/A = base + added / A, pair by pair
                added, base_med = int(config[4:]) * 1000 * args.iters, statistics.median(base_r)
                row["expected"] = statistics.median(base_med + added / ta for ta, _ in state) / base_med
            if analysis:  # the corrected figure against A over the same pairs, base ratio out
                a_iter = sum(ta for ta, _ in state) / (len(state) * args.iters)
                base_sum = sum(tb for _, tb in base) / sum(ta for ta, _ in base)
                row["corrected_error"] = analysis["corrected_ns"] / a_iter / base_sum - 1
                row["raw_error"] = analysis["raw_ns"] / a_iter / base_sum - 1
                if a_ops1:  # per operation: B's corrected ns a call over A's timed ns a call, base out
                    errors, untimed = _op_errors(analysis["ops"], a_ops0, a_ops1, a_iter, base_sum)
                    row["op_errors"], row["a_untimed_share"] = errors, untimed
                if keep:  # the pairs by B's kind of window: what each kind really cost against A
                    by = window_pairs(keep.strip(), spans, statistics.median(base_r))
                    row["window_pairs"] = {
                        k: (len(v), statistics.median(v) if v else None) for k, v in by.items()
                    }
            results.append(row)
            print(
                f"round {r + 1} {config:13} base {row['base_ratio'][1]:.3f} "
                f"[{row['base_ratio'][0]:.3f}-{row['base_ratio'][2]:.3f}]  state {row['state_ratio'][1]:.3f} "
                f"[{row['state_ratio'][0]:.3f}-{row['state_ratio'][2]:.3f}]  cost {row['cost']:.3f}  "
                f"A {row['a_us'][0]:.0f}-{row['a_us'][2]:.0f} us/iter  enter {row['enter_ms']:.0f} ms",
                flush=True,
            )
            if "expected" in row:
                print(f"        {config:13} expected {row['expected']:.3f}", flush=True)
            if analysis:
                print(
                    f"        {config:13} iter: corrected {row['corrected_error']:+.1%}"
                    f"  raw {row['raw_error']:+.1%}"
                    f"  ({analysis['calls']} calls, corrected={analysis['corrected']},"
                    f" writer removed {analysis.get('writer_s', 0.0) * 1e3:.0f} ms)",
                    flush=True,
                )
            if row.get("op_errors"):
                cells = [
                    f"{k} {c:+.1%} (raw {r:+.1%}, {sh:.0%})" for k, (c, r, sh) in row["op_errors"].items()
                ]
                print(
                    f"        {config:13} per operation, corrected: {', '.join(cells)};"
                    f" A's wall outside its timers {row['a_untimed_share']:.1%}",
                    flush=True,
                )
            if row.get("window_pairs"):
                cells = [f"{k} {n}: {m:.3f}" for k, (n, m) in row["window_pairs"].items() if m is not None]
                print(
                    f"        {config:13} pairs by B's window (B/A over base): {', '.join(cells)}", flush=True
                )
        if r + 1 < args.rounds:  # a fresh A each round too
            a.close()
            a = Proc(args.device, args.park, args.loop, args.a_timers)
    a.close()
    print("cost (state / base), median [min-max] over rounds:")
    summary = {}
    for config in configs:
        costs = [x["cost"] for x in results if x["config"] == config]
        summary[config] = costs
        line = f"  {config:13} {statistics.median(costs):.3f} [{min(costs):.3f}-{max(costs):.3f}]"
        errs = [x["corrected_error"] for x in results if x["config"] == config and "corrected_error" in x]
        if errs:
            line += (
                f"  corrected iter error {statistics.median(errs):+.1%} [{min(errs):+.1%}, {max(errs):+.1%}]"
            )
            summary[config + ".corrected_error"] = errs
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": results, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
