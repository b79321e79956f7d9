"""The report's timeline and roles section group processes by role: Ray, multiprocessing and torchrun alike.

Synthetic traces written in this process: each "process" is a session with a fake clock, whose pid and
parent pid are faked while it runs; a Ray worker's role comes from its ``ray.json`` (rlscope/ray.py).
"""

from __future__ import annotations

import json
import os

import rlscope
from rlscope.analysis import analyze
from rlscope.analysis.report import report_data
from rlscope.analysis.roles import DDP_RANK, TORCHRUN_AGENT, worker_label
from rlscope.trace import schema as S
from rlscope.trace.reader import load_trace
from rlscope.viz import html
from tests.conftest import FakeClock

MS = 1_000_000


def _process(trace, monkeypatch, pid: int, ppid: int, ops: dict[str, int], ray_meta=None, env=None) -> None:
    """One process's session: each operation of ``ops`` once, that many ns long, then 1 ms outside any."""
    with monkeypatch.context() as m:
        m.setattr(os, "getpid", lambda: pid)
        m.setattr(os, "getppid", lambda: ppid)
        for k, v in (env or {}).items():
            m.setenv(k, v)
        sess = rlscope.profile(trace, backend=False, gpu=False, windows=False)
        sess.clock = clock = FakeClock()
        with sess:
            for name, ns in ops.items():
                with rlscope.scope(name):
                    clock.advance(ns)
            clock.advance(MS)  # unannotated: every session lasts, even one without operations
    if ray_meta is not None:
        (trace / f"{S.PROCESS_PREFIX}{pid}" / S.RAY_META_FILE).write_text(json.dumps(ray_meta))


def _ray(role: str, node: str = "node0000abcd", name: str = "") -> dict[str, str]:
    return {"ray.role": role, "ray.node_id": node, "ray.actor_name": name}


def _row_roles(tl: dict) -> list[str]:
    """The role of every timeline row, from the groups."""
    out = [""] * len(tl["rows"])
    for g in tl["groups"]:
        out[g["first"] : g["last"] + 1] = [g["role"]] * (g["last"] - g["first"] + 1)
    return out


def _check_grouped(tl: dict, processes: list[dict]) -> None:
    """Every process has its row, named by worker_label, and its role's rows are contiguous."""
    roles = _row_roles(tl)
    assert "" not in roles
    assert len(tl["groups"]) == len({g["role"] for g in tl["groups"]})  # each role once: contiguous
    for p in processes:
        row = worker_label(p)
        assert roles[tl["rows"].index(row)] == p["role"]
        assert row in tl["processes"]["row"]


def test_ray_timeline_rows_grouped_by_role_driver_first(tmp_path, monkeypatch):
    trace = tmp_path / "trace"
    # pids deliberately out of role order: rows must follow roles, not pids
    _process(trace, monkeypatch, 40, 1, {"rollout": 2 * MS}, _ray("RolloutWorker", name="w0"))
    _process(trace, monkeypatch, 10, 1, {"score": 1 * MS}, _ray("score"))
    _process(trace, monkeypatch, 30, 1, {"rollout": 6 * MS}, _ray("RolloutWorker", name="w1"))
    _process(trace, monkeypatch, 50, 1, {"learn": 3 * MS}, _ray("driver"))
    _process(trace, monkeypatch, 20, 1, {"rollout": 2 * MS}, _ray("RolloutWorker", name="w2"))
    result = analyze(trace, correct=False)
    tl = result.report["timeline"]
    procs = result.summary["processes"]
    _check_grouped(tl, procs)
    assert [g["role"] for g in tl["groups"]] == ["driver", "RolloutWorker", "score"]
    assert tl["rows"][0] == "driver · node0000 · pid 50"
    workers = [r for r in tl["rows"] if r.startswith("RolloutWorker")]
    assert workers == [f"RolloutWorker w{i} · node0000 · pid {pid}" for i, pid in ((2, 20), (1, 30), (0, 40))]
    # the main thread's operations are drawn on their worker's row
    assert set(tl["ops"]["row"]) == {worker_label(p) for p in procs}
    assert list(result.summary["roles"]) == ["driver", "RolloutWorker", "score"]
    # report_data (from the trace alone) labels the rows the same way
    assert report_data(load_trace(trace))["timeline"]["rows"] == tl["rows"]

    page = html.render(result)
    assert "<h2>Roles</h2>" in page and "<h3>RolloutWorker: 3 worker(s)</h3>" in page
    # the lagging worker (6 ms against a median of 2 ms) is named and linked to its section
    assert "<a href='#process-30'>RolloutWorker w1 · node0000 · pid 30</a> 3.00×" in page
    assert "<td>rollout</td><td>0.010</td>" in page  # the role's breakdown: 2 + 6 + 2 ms


def test_multiprocessing_and_torchrun_rows(tmp_path, monkeypatch):
    mp = tmp_path / "mp"
    _process(mp, monkeypatch, 7, 1, {"main": 1 * MS})
    _process(mp, monkeypatch, 9, 7, {"task": 1 * MS})
    _process(mp, monkeypatch, 8, 7, {"task": 1 * MS})
    result = analyze(mp, correct=False)
    tl = result.report["timeline"]
    _check_grouped(tl, result.summary["processes"])
    assert [g["role"] for g in tl["groups"]] == ["main", "child"]
    host = result.summary["processes"][0]["host"]
    assert tl["rows"] == [f"main · {host} · pid 7", f"child · {host} · pid 8", f"child · {host} · pid 9"]

    ddp = tmp_path / "ddp"
    for rank, pid in ((1, 22), (0, 21)):
        env = {"WORLD_SIZE": "2", "RANK": str(rank), "LOCAL_RANK": str(rank)}
        _process(ddp, monkeypatch, pid, 20, {"backprop": 1 * MS}, env=env)
    _process(ddp, monkeypatch, 20, 1, {})  # the torchrun agent
    result = analyze(ddp, correct=False)
    tl = result.report["timeline"]
    _check_grouped(tl, result.summary["processes"])
    assert [g["role"] for g in tl["groups"]] == [TORCHRUN_AGENT, DDP_RANK]
    assert tl["rows"] == [
        f"torchrun agent · {host} · pid 20",
        f"rank 0 · {host} · pid 21",
        f"rank 1 · {host} · pid 22",
    ]


def test_single_process_rows_unchanged(tmp_path, monkeypatch):
    trace = tmp_path / "one"
    _process(trace, monkeypatch, 5, 1, {"step": 1 * MS})
    tl = analyze(trace, correct=False).report["timeline"]
    assert tl["groups"] == [] and tl["processes"]["row"] == []
    assert len(tl["rows"]) == 1 and tl["rows"][0].startswith("pid 5 thread ")
    assert tl["rows"][0].endswith(" (main)")


def test_roles_section_absent_with_one_process(tmp_path, monkeypatch):
    trace = tmp_path / "one"
    _process(trace, monkeypatch, 5, 1, {"step": 1 * MS})
    assert "<h2>Roles</h2>" not in html.render(analyze(trace, correct=False))


def test_the_headline_is_the_main_process_and_workers_stay_in_their_roles(tmp_path, monkeypatch):
    """A learner and two env workers: the headline figures are the learner's, so no row sums the
    workers' idle time into several times the run; each worker's own figures are in its role."""
    trace = tmp_path / "vec"
    _process(trace, monkeypatch, 7, 1, {"simulation": 5 * MS, "inference": 2 * MS})
    for pid in (8, 9):
        _process(trace, monkeypatch, pid, 7, {"simulation": 4 * MS})
    s = analyze(trace, correct=False).summary
    assert s["headline"]["pids"] == [7] and "main" in s["headline"]["why"]
    assert s["operations"]["simulation"]["calls"] == 1
    assert s["operations"]["simulation"]["total_s"] * 1e9 == 5 * MS
    assert s["unannotated_s"] * 1e9 == 1 * MS  # the learner's own, not three processes'
    assert all(o["total_s"] <= s["wall_s"] for o in s["operations"].values())
    child = s["roles"]["env worker"]
    assert child["workers"] == 2 and child["operations"]["simulation"]["calls"] == 2


def test_the_headline_of_a_ddp_job_is_rank_0(tmp_path, monkeypatch):
    trace = tmp_path / "ddp"
    for rank, pid, ms in ((1, 22, 3), (0, 21, 2)):
        env = {"WORLD_SIZE": "2", "RANK": str(rank), "LOCAL_RANK": str(rank)}
        _process(trace, monkeypatch, pid, 20, {"backprop": ms * MS}, env=env)
    _process(trace, monkeypatch, 20, 1, {})  # the torchrun agent
    s = analyze(trace, correct=False).summary
    assert s["headline"]["pids"] == [21] and s["headline"]["why"].startswith("rank 0 of 2")
    assert s["operations"]["backprop"]["total_s"] * 1e9 == 2 * MS
    assert s["roles"][DDP_RANK]["operations"]["backprop"]["calls"] == 2


def test_a_launcher_that_ran_no_operation_gives_the_headline_to_the_busiest(tmp_path, monkeypatch):
    trace = tmp_path / "pool"
    _process(trace, monkeypatch, 7, 1, {})
    _process(trace, monkeypatch, 8, 7, {"task": 1 * MS})
    _process(trace, monkeypatch, 9, 7, {"task": 3 * MS})
    s = analyze(trace, correct=False).summary
    assert s["headline"]["pids"] == [9] and "busiest" in s["headline"]["why"]
    assert s["operations"]["task"]["calls"] == 1 and s["roles"]["child"]["operations"]["task"]["calls"] == 2
