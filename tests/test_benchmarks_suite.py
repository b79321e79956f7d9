"""The benchmark runner's logic on synthetic results: verdicts, the checker's exit status, the suites.

Nothing here times anything: the figures are made up, the steps are stand-ins.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import __main__ as runner  # noqa: E402
from benchmarks import compare, suites  # noqa: E402

BASELINE = {
    "machines": {
        "cpu-vm": {
            "figures": {
                "costs.scope_ns": {"value": 200.0, "unit": "ns", "better": "lower"},
                "analyzer.events_per_s": {"value": 5.0, "unit": "M/s", "better": "higher", "tolerance": 0.1},
                "matrix.dqn.total_error_pct": {"value": 1.0, "unit": "%", "better": "zero", "limit": 5.0},
                "ddp.nccl_s": {"value": None, "unit": "s", "better": "lower", "note": "not yet measured"},
                "sim.fused_steps_per_s": {
                    "value": 6e11,
                    "unit": "steps/s",
                    "better": "higher",
                    "suites": ["gpu"],
                },
                "ray.actors_seen": {"value": 4, "unit": "actors", "better": "higher"},
            }
        }
    }
}


def results(**values: float | None) -> dict:
    return {
        "suite": "cpu",
        "machine": "cpu-vm",
        "figures": {
            name.replace("__", "."): {"value": v, "unit": "", "better": "lower"} for name, v in values.items()
        },
    }


def statuses(res: dict) -> dict[str, str]:
    return {v.name: v.status for v in compare.compare(res, BASELINE)}


@pytest.mark.parametrize(
    ("value", "status"),
    [(200.0, "PASS"), (249.0, "PASS"), (251.0, "FAILED"), (149.0, "IMPROVED"), (151.0, "PASS")],
)
def test_lower_is_better_within_the_default_relative_tolerance(value, status):
    assert compare.judge(value, {"value": 200.0, "better": "lower"})[0] == status


@pytest.mark.parametrize(
    ("value", "status"), [(5.0, "PASS"), (4.4, "FAILED"), (5.6, "IMPROVED"), (4.6, "PASS")]
)
def test_higher_is_better_with_the_figures_own_tolerance(value, status):
    assert compare.judge(value, {"value": 5.0, "better": "higher", "tolerance": 0.1})[0] == status


@pytest.mark.parametrize(
    ("value", "status"),
    [(1.0, "PASS"), (-3.9, "FAILED"), (3.9, "FAILED"), (-3.5, "PASS"), (5.5, "FAILED"), (0.0, "PASS")],
)
def test_an_error_is_judged_by_its_distance_from_zero_and_by_the_band(value, status):
    base = {"value": 0.5, "better": "zero", "tolerance": 3.0, "limit": 5.0}
    assert compare.judge(value, base)[0] == status


def test_improved_error_and_the_band_beats_the_baseline():
    assert compare.judge(0.2, {"value": 4.5, "better": "zero"})[0] == "IMPROVED"
    # a baseline already outside the band does not excuse a figure outside it
    assert compare.judge(6.0, {"value": 6.5, "better": "zero", "limit": 5.0})[0] == "FAILED"


def test_new_missing_and_not_measured_figures_are_reported_not_failed(tmp_path):
    res = results(
        costs__scope_ns=210.0, matrix__dqn__total_error_pct=-2.0, costs__new_ns=5.0, ddp__nccl_s=1.0
    )
    got = statuses(res)
    assert got == {
        "costs.scope_ns": "PASS",
        "matrix.dqn.total_error_pct": "PASS",
        "costs.new_ns": "NEW",
        "ddp.nccl_s": "NOT MEASURED",
        "analyzer.events_per_s": "MISSING",
        "ray.actors_seen": "MISSING",
    }  # sim.fused_steps_per_s belongs to the gpu suite: not missing from a cpu run
    path = tmp_path / "results.json"
    path.write_text(json.dumps(res))
    base = tmp_path / "baseline.json"
    base.write_text(json.dumps(BASELINE))
    assert runner.main(["check", str(path), "--baseline", str(base)]) == 0


def test_check_exits_1_when_a_figure_failed_and_2_for_an_unknown_machine(tmp_path, capsys):
    base = tmp_path / "baseline.json"
    base.write_text(json.dumps(BASELINE))
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results(costs__scope_ns=400.0, analyzer__events_per_s=6.0)))
    assert runner.main(["check", str(path), "--baseline", str(base)]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "IMPROVED" in out
    assert runner.main(["check", str(path), "--baseline", str(base), "--machine", "h300"]) == 2
    assert "no baseline for machine 'h300'" in capsys.readouterr().err


def test_a_value_the_run_could_not_give_is_missing():
    assert statuses(results(costs__scope_ns=None))["costs.scope_ns"] == "MISSING"


def test_run_writes_every_steps_figures_and_records_skips_and_errors(tmp_path, monkeypatch, capsys):
    def good(ctx: suites.Context) -> suites.Figures:
        assert ctx.work.is_dir() and ctx.suite == "ci"
        return {"costs.scope_ns": suites.fig(190.0, "ns", "lower")}

    def skipped(ctx: suites.Context) -> suites.Figures:
        raise suites.Skip("no CUDA GPU")

    def broken(ctx: suites.Context) -> suites.Figures:
        raise RuntimeError("exit 3: boom")

    monkeypatch.setattr(suites, "STEPS", {"good": good, "skipped": skipped, "broken": broken})
    monkeypatch.setattr(suites, "SUITES", {"ci": ["good", "skipped", "broken"]})
    base = tmp_path / "baseline.json"
    base.write_text(json.dumps(BASELINE))
    monkeypatch.setattr(compare, "BASELINE", base)
    out = tmp_path / "r.json"
    assert runner.main(["run", "--suite", "ci", "--out", str(out), "--machine", "cpu-vm"]) == 1
    res = json.loads(out.read_text())
    assert res["figures"] == {"costs.scope_ns": {"value": 190.0, "unit": "ns", "better": "lower"}}
    assert {k: v["status"] for k, v in res["steps"].items()} == {
        "good": "ok",
        "skipped": "skipped",
        "broken": "error",
    }
    assert res["steps"]["skipped"]["note"] == "no CUDA GPU"
    assert res["steps"]["broken"]["note"] == "RuntimeError: exit 3: boom"
    assert "costs.scope_ns" in capsys.readouterr().out  # compared with the baseline at the end
    assert (
        runner.main(["run", "--suite", "ci", "--out", str(out), "--only", "good", "--machine", "cpu-vm"]) == 0
    )
    assert list(json.loads(out.read_text())["steps"]) == ["good"]


def test_validation_figures_take_the_medians_of_a_validate_json():
    result = {
        "rows": [
            {
                "operation": "[total]",
                "ok": True,
                "error": [0.01, 0.03, -0.02],
                "raw_slowdown": [1.1, 1.3, 1.2],
            },
            {"operation": "inference", "ok": True, "error": [0.05, 0.06, 0.07], "raw_slowdown": [None]},
            {"operation": "backprop", "ok": False, "error": [-0.09, -0.08, -0.10], "raw_slowdown": [None]},
            {"operation": "tiny", "ok": None, "error": [0.5], "raw_slowdown": [None]},
        ],
        "verdict": {"pass": False, "line": "FAIL"},
    }
    figs = suites.validation_figures("dqn", result)
    assert figs["matrix.dqn.total_error_pct"]["value"] == pytest.approx(1.0)
    assert figs["matrix.dqn.raw_slowdown_x"]["value"] == pytest.approx(1.2)
    assert figs["matrix.dqn.worst_operation_error_pct"]["value"] == pytest.approx(
        -9.0
    )  # unchecked rows left out
    assert figs["matrix.dqn.pass"]["value"] == 0.0


def test_the_committed_baseline_is_well_formed():
    base = compare.load(compare.BASELINE)
    assert {"cpu-vm", "h100", "h200"} <= set(base["machines"])
    steps = set(suites.STEPS)
    for machine, entry in base["machines"].items():
        for name, f in entry["figures"].items():
            assert name.split(".")[0] in steps | {"sim", "auto"}, name
            assert f["better"] in compare.TOLERANCE, (machine, name)
            assert f.get("unit"), (machine, name)
            if f["value"] is None:
                assert f.get("note"), (machine, name)  # a placeholder says why
            else:
                assert f.get("date") and f.get("commit") and f.get("command"), (machine, name)
    every_step = {s for steps_ in suites.SUITES.values() for s in steps_}
    assert every_step <= set(suites.STEPS)
