"""Presents the simulator benchmark's result dict: a rich table and a plotly HTML report.

Reads only the dict that ``rlscope.workloads.sim_benchmark.run_benchmark`` returns (or its JSON), never
raw traces. rich and plotly are imported inside the functions that use them. Its text (device and
backend names, notes, trace paths, why a run was skipped) is shown as the profiler's tables show
names: through :func:`rlscope.text.printable` on the terminal, never read as rich markup, and through
:func:`rlscope.text.html_text` in the page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlscope.text import html_text

__all__ = ["render_table", "write_html"]

BACKEND_ORDER = ("gymnasium-1", "gymnasium", "torch", "compiled", "fused", "gymnax")


def _si(v: float | None) -> str:
    if v is None:
        return "-"
    for div, suf in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suf}"
    return f"{v:.3g}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:,.3g}x" if v < 1000 else f"{v:,.0f}x"


def _pow2(n: int) -> str:
    e = n.bit_length() - 1
    return f"2^{e}" if n == 1 << e and n >= 1024 else str(n)


def best_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (backend, N): the fastest K."""
    best: dict[tuple[str, int], dict[str, Any]] = {}
    for r in result.get("cartpole", []):
        key = (r["backend"], r["num_envs"])
        if key not in best or r["steps_per_sec"] > best[key]["steps_per_sec"]:
            best[key] = r
    order = {b: i for i, b in enumerate(BACKEND_ORDER)}
    return sorted(best.values(), key=lambda r: (order.get(r["backend"], 99), r["num_envs"]))


def render_table(result: dict[str, Any], console: Any) -> None:
    """Print throughput, speedups, the chain curve, the targets and (if present) the per-category
    breakdown of the profiled runs to a ``rich.console.Console``."""
    from rich.table import Table
    from rich.text import Text

    from rlscope.viz.terminal import cell

    meta = result.get("meta", {})
    where = meta.get("gpu") or f"CPU ({meta.get('cpu_count')} cores)"
    console.print(
        Text.assemble(
            ("Simulator benchmark", "bold"),
            cell(f" on {where}, {meta.get('date', '')}, torch {meta.get('torch')}"),
        )
    )

    t = Table(title="CartPole-v1, linear policy: env-steps per second (best K per backend and N)")
    for col, just in (("backend", "left"), ("N", "right"), ("K", "right"), ("steps/s", "right"),
                      ("x single gymnasium", "right"), ("x gymnasium vector", "right")):  # fmt: skip
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in best_rows(result):
        t.add_row(
            cell(r["backend"]),
            _pow2(r["num_envs"]),
            str(r.get("k", 1)),
            _si(r["steps_per_sec"]),
            _x(r.get("speedup_vs_single_gymnasium")),
            _x(r.get("speedup_vs_gymnasium_vector")),
        )
    console.print(t)

    ks = sorted({r["k"] for r in result.get("cartpole", []) if r["backend"] == "fused"})
    if len(ks) > 1:
        kt = Table(title="fused: env-steps per second by K (steps per launch)")
        kt.add_column("N", justify="right")
        for k in ks:
            kt.add_column(f"K={k}", justify="right")
        by = {
            (r["num_envs"], r["k"]): r["steps_per_sec"] for r in result["cartpole"] if r["backend"] == "fused"
        }
        for n in sorted({n for n, _ in by}):
            kt.add_row(_pow2(n), *(_si(by.get((n, k))) for k in ks))
        console.print(kt)

    if result.get("fused_variants"):
        vt = Table(title="fused at N=2^20: what each feature costs")
        vt.add_column("variant")
        vt.add_column("steps/s", justify="right")
        vt.add_column("mean return", justify="right")
        for r in result["fused_variants"]:
            mr = r.get("mean_return")
            vt.add_row(cell(r["variant"]), _si(r["steps_per_sec"]), "-" if mr is None else f"{mr:.1f}")
        console.print(vt)

    if result.get("chain"):
        ct = Table(title="mass-spring chain (S links, 8*S bytes of state per env): env-steps per second")
        ct.add_column("S", justify="right")
        backends = [
            b for b in ("torch", "compiled", "fused") if any(r["backend"] == b for r in result["chain"])
        ]
        for b in backends:
            ct.add_column(b, justify="right")
        ct.add_column("fused / torch", justify="right")
        ct.add_column("fused / compiled", justify="right")
        by = {(r["backend"], r["links"]): r["steps_per_sec"] for r in result["chain"]}
        sp = {s["links"]: s for s in result.get("chain_speedup", [])}
        for s in sorted({r["links"] for r in result["chain"]}):
            ct.add_row(
                str(s),
                *(_si(by.get((b, s))) for b in backends),
                _x(sp.get(s, {}).get("fused_over_torch")),
                _x(sp.get(s, {}).get("fused_over_compiled")),
            )
        console.print(ct)

    if result.get("targets"):
        tt = Table(title="Targets")
        for col in ("target", "required", "measured", "met", "note"):
            tt.add_column(col)
        for r in result["targets"]:
            met = {True: "[green]met[/green]", False: "[red]missed[/red]", None: "not measured"}[r["met"]]
            tt.add_row(
                cell(r["target"]), _si(r["required"]), _si(r["measured"]), met, cell(r.get("note", ""))
            )
        console.print(tt)

    prof = result.get("profiled") or {}
    breakdown = result.get("breakdown") or {}
    if prof:
        cats = sorted({c for b in breakdown.values() for c in b if not c.startswith("_")})
        pt = Table(title="Profiled runs (rlscope): throughput beside where the time went")
        pt.add_column("backend")
        pt.add_column("N", justify="right")
        pt.add_column("steps/s", justify="right")
        for c in cats:
            pt.add_column(cell(f"{c} %"), justify="right")
        pt.add_column("trace")
        for b, p in prof.items():
            shares = breakdown.get(b, {})
            # percent of the profiled run's wall time (CPU categories add up to it; gpu_bound is apart)
            total = shares.get("_wall") or sum(v for c, v in shares.items() if c != "gpu_bound") or 1.0
            pt.add_row(
                cell(b),
                _pow2(p["num_envs"]),
                _si(p["steps_per_sec"]),
                *(f"{100 * shares.get(c, 0.0) / total:.0f}" for c in cats),
                cell(p["trace"]),
            )
        console.print(pt)
    for s in result.get("skipped", []):
        console.print(cell(f"skipped {s['what']}: {s['why']}", "dim"))


def write_html(result: dict[str, Any], path: str | Path, *, self_contained: bool = False) -> Path:
    """A plotly report: throughput vs N (log axes), speedup bars, the chain fusion curve."""
    import plotly.graph_objects as go

    figs = []
    rows = best_rows(result)
    tp = go.Figure()
    for b in BACKEND_ORDER:
        pts = [r for r in rows if r["backend"] == b]
        if not pts:
            continue
        mode = "markers" if len(pts) == 1 else "lines+markers"
        tp.add_trace(
            go.Scatter(
                x=[r["num_envs"] for r in pts],
                y=[r["steps_per_sec"] for r in pts],
                mode=mode,
                name=b,
                text=[f"K={r.get('k', 1)}" for r in pts],
            )
        )
    tp.update_layout(
        title="CartPole-v1: env-steps per second vs number of envs (best K)",
        xaxis={"type": "log", "title": "num_envs N"},
        yaxis={"type": "log", "title": "env-steps / s"},
    )
    figs.append(tp)

    largest: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["backend"] not in largest or r["num_envs"] > largest[r["backend"]]["num_envs"]:
            largest[r["backend"]] = r
    names = [b for b in BACKEND_ORDER if b in largest]
    sp = go.Figure(
        [
            go.Bar(
                name="vs one gymnasium env",
                x=[f"{b} (N={_pow2(largest[b]['num_envs'])})" for b in names],
                y=[largest[b].get("speedup_vs_single_gymnasium") for b in names],
            ),
            go.Bar(
                name="vs gymnasium vector env, same N",
                x=[f"{b} (N={_pow2(largest[b]['num_envs'])})" for b in names],
                y=[largest[b].get("speedup_vs_gymnasium_vector") for b in names],
            ),
        ]
    )
    sp.update_layout(title="Speedup at each backend's largest N", yaxis={"type": "log", "title": "speedup"})
    figs.append(sp)

    if result.get("chain_speedup"):
        cs = go.Figure()
        pts = result["chain_speedup"]
        curves = (
            ("fused_over_torch", "fused / torch (eager)"),
            ("fused_over_compiled", "fused / compiled"),
            ("compiled_over_torch", "compiled / torch"),
        )
        for key, label in curves:
            ys = [p.get(key) for p in pts]
            if any(y is not None for y in ys):
                cs.add_trace(go.Scatter(x=[p["links"] for p in pts], y=ys, mode="lines+markers", name=label))
        cs.update_layout(
            title="Mass-spring chain: speedup vs links S (state bytes per env = 8 S)",
            xaxis={"type": "log", "title": "links S"},
            yaxis={"type": "log", "title": "speedup"},
        )
        figs.append(cs)

    meta = result.get("meta", {})
    head = (
        f"<h1>rlscope simulator benchmark</h1><p>{html_text(meta.get('date', ''))} on "
        f"{html_text(meta.get('gpu') or 'CPU')}; torch {html_text(meta.get('torch'))}, "
        f"triton {html_text(meta.get('triton'))}; "
        f"command: <code>{html_text(meta.get('command', ''))}</code></p>"
    )
    parts = [
        f.to_html(full_html=False, include_plotlyjs=(True if self_contained else "cdn") if i == 0 else False)
        for i, f in enumerate(figs)
    ]
    verdict = {True: "met", False: "missed", None: "not measured"}
    targets = "".join(
        f"<tr><td>{html_text(t['target'])}</td><td>{_si(t['required'])}</td><td>{_si(t['measured'])}</td>"
        f"<td>{verdict[t['met']]}</td><td>{html_text(t.get('note', ''))}</td></tr>"
        for t in result.get("targets", [])
    )
    table = (
        "<h2>Targets</h2><table border=1><tr><th>target</th><th>required</th><th>measured</th><th>met</th>"
        f"<th>note</th></tr>{targets}</table>"
    )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        f"<html><head><meta charset='utf-8'></head><body>{head}{''.join(parts)}{table}</body></html>"
    )
    return out
