"""The HTML report's "Sharing" section: GPU memory, occupancy, kernel lengths and the co-location estimate.

Draws the summary's ``sharing`` figures (rlscope/analysis/sharing.py) and nothing else; a trace
without them (CPU-only, or GPU tracing off) gets one line saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rlscope.analysis.demangle import demangle
from rlscope.text import html_text
from rlscope.viz.colors import operation_color

MIB = 1 << 20
TOP_OPS = 8


def _mib(b: float) -> str:
    return f"{b / MIB:,.1f}"


def _table(head: list[str], rows: list[list[Any]]) -> str:
    th = "".join(f"<th>{html_text(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html_text(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table class='kernels'><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _note(text: str) -> str:
    return f"<p class='empty'>{html_text(text)}</p>"


def _memory(mem: Mapping[str, Any], fig: Callable[[Any], str]) -> str:
    if "note" in mem:
        return _note(mem["note"])
    import plotly.graph_objects as go

    p = mem["processes"][0]
    c = mem["curve"]
    out = [
        "<p class='note'>Allocated memory of the CUDA caching allocator over the run (band: least and most"
        " per time bin), reserved memory, and the persistent floor (least allocated over the second half of"
        f" the run). Peak {_mib(p['peak_bytes'])} MiB, floor {_mib(p['floor_bytes'])} MiB, cyclic peak"
        f" {_mib(p['cyclic_peak_bytes'])} MiB, reserved peak {_mib(p['reserved_peak_bytes'])} MiB"
        f" ({100 * p['fragmentation']:.0f}% of it unallocated at the peak).</p>"
    ]
    if p.get("recorded_share", 1.0) < 1.0:  # RLSCOPE_GPU_MEMORY=windows
        out.append(
            _note(
                f"Recorded in full windows only ({100 * p['recorded_share']:.0f}% of the run): the curves"
                " are exact at each window's start and through it, flat between; each operation's"
                " figures come from its calls inside a recording window, scaled to all its calls."
            )
        )
    if p.get("peak_source") == "allocator":
        out.append(
            _note(
                "The peak was reached where no event was recorded: it is the allocator's own high-water"
                " mark over the run (torch.cuda.max_memory_allocated), not a point of the curve."
            )
        )
    f = go.Figure()
    t = c["t_s"]
    f.add_trace(
        go.Scatter(x=t, y=[v / MIB for v in c["allocated_min"]], name="allocated (min)", mode="lines")
    )
    f.add_trace(
        go.Scatter(
            x=t, y=[v / MIB for v in c["allocated_max"]], name="allocated (max)", mode="lines", fill="tonexty"
        )
    )
    f.add_trace(go.Scatter(x=t, y=[v / MIB for v in c["reserved"]], name="reserved", mode="lines"))
    f.add_hline(y=p["floor_bytes"] / MIB, line_dash="dot", annotation_text="persistent floor")
    f.update_layout(
        height=320, xaxis_title="s since the run start", yaxis_title="MiB", template="plotly_white"
    )
    out.append(fig(f))
    rows = [
        [
            op,
            e["calls"],
            e["allocations"],
            _mib(e["allocated_bytes"]),
            _mib(e["ephemeral_bytes"]),
            _mib(e["persistent_bytes"]),
            _mib(e["peak_bytes"]),
        ]
        for op, e in list(mem["operations"].items())[:20]
    ]
    head = [
        "operation",
        "calls",
        "allocations",
        "allocated MiB",
        "ephemeral MiB",
        "persistent MiB",
        "peak MiB",
    ]
    out.append(_table(head, rows))
    return "\n".join(out)


def _occupancy(occ: Mapping[str, Any]) -> str:
    if "note" in occ:
        return _note(occ["note"])
    out = [
        "<p class='note'>Theoretical occupancy (CUDA occupancy calculator rules,"
        f" {html_text(str(occ['device'].get('sm_count', '?')))}"
        f" SMs) of each operation's top kernels by GPU time, and the resource that limits it. "
        f"{100 * occ['low_fill_share']:.0f}% of all kernel time is in launches that fill less than"
        f" {100 * occ['low_fill_threshold']:.0f}% of the GPU's warp slots.</p>"
    ]
    for op, e in list(occ["operations"].items())[:TOP_OPS]:
        out.append(
            f"<h3>{html_text(op)} <span class='note'>{1e3 * e['gpu_time_s']:.3f} ms kernel time,"
            f" {100 * e['low_fill_share']:.0f}% in low-fill launches</span></h3>"
        )
        rows = [
            [
                demangle(k["kernel"])[:100],
                k["count"],
                f"{1e3 * k['total_s']:.3f}",
                k["blocks"],
                k["threads"],
                k["registers"],
                k["smem"],
                f"{100 * k['occupancy']:.0f}%",
                k["limiter"],
                f"{100 * k['fill']:.1f}%",
            ]
            for k in e["kernels"]
        ]
        head = [
            "kernel",
            "count",
            "ms",
            "blocks",
            "threads",
            "regs",
            "smem B",
            "occupancy",
            "limiter",
            "fill",
        ]
        out.append(_table(head, rows))
    return "\n".join(out)


def _lengths(kl: Mapping[str, Any], fig: Callable[[Any], str]) -> str:
    if "note" in kl:
        return _note(kl["note"])
    import plotly.graph_objects as go

    edges = kl["edges_us"]
    labels = [f"{edges[i]:.3g}–{edges[i + 1]:.3g}" for i in range(len(edges) - 1)]
    f = go.Figure()
    for op, e in list(kl["operations"].items())[:TOP_OPS]:
        if e["kernels"].get("count"):
            f.add_trace(
                go.Bar(
                    x=labels,
                    y=e["kernels"]["histogram"],
                    name=html_text(op, quote=False),
                    marker_color=operation_color(op),  # the operation's colour in every chart
                )
            )
    f.update_layout(
        barmode="group",
        height=300,
        xaxis_title="kernel duration (µs)",
        yaxis_title="kernels",
        template="plotly_white",
    )
    rows = []
    for op, e in kl["operations"].items():
        k, g = e["kernels"], e["gaps"]
        rows.append(
            [
                op,
                k.get("count", 0),
                f"{k.get('p50_us', 0):.1f}",
                f"{k.get('p90_us', 0):.1f}",
                f"{k.get('p99_us', 0):.1f}",
                f"{k.get('max_us', 0):.1f}",
                f"{k.get('mean_residual_us', 0):.1f}",
                f"{g.get('p50_us', 0):.1f}",
                f"{g.get('p90_us', 0):.1f}",
            ]
        )
    head = [
        "operation",
        "kernels",
        "p50 µs",
        "p90 µs",
        "p99 µs",
        "max µs",
        "mean residual µs",
        "gap p50 µs",
        "gap p90 µs",
    ]
    sl = "; ".join(
        f"> {s['target_us']:g} µs: {s['kernels']} kernels, {100 * s['share_of_gpu_time']:.0f}% of GPU time"
        for s in kl["slicing"]
    )
    return "\n".join(
        [
            "<p class='note'>Kernel durations and the gaps between kernels on each stream, per launching"
            " operation. The mean residual is how long another job's kernel would wait, on average, behind"
            f" one of these found running. Kernels a latency target would need sliced:"
            f" {html_text(sl)}.</p>",
            fig(f),
            _table(head, rows),
        ]
    )


def _estimate(est: Mapping[str, Any]) -> str:
    if "note" in est:
        return _note(est["note"])
    m = est["inputs"]
    rows = [
        [
            t["k"],
            f"{t['memory_bytes'] / (1 << 30):.2f}",
            "yes" if t["fits_memory"] else "no",
            f"{t['slowdown']:.3f}",
            f"{t['throughput']:.2f}",
            t["binds"],
        ]
        for t in est["table"]
    ]
    head = ["copies k", "memory GiB", "fits", "slowdown per copy", "throughput (x one copy)", "binds"]
    notes = "".join(f"<li>{html_text(n)}</li>" for n in m.get("notes", []))
    return (
        "<p class='note'>Estimate for k copies of this job on one"
        f" {html_text(str(m.get('device') or 'GPU'))}"
        f" (docs/sharing.md): alone it keeps the GPU busy {100 * m['gpu_busy_fraction']:.1f}% of the time,"
        f" needs {m['per_copy_bytes'] / (1 << 30):.2f} GiB of device memory and {m['cpu_cores_per_copy']:.2f}"
        f" CPU cores. Up to <b>{est['k_fit']}</b> copies fit with each at most"
        f" {100 * (est['max_slowdown'] - 1):.0f}% slower; then {html_text(est['binds'])} binds.</p>"
        + _table(head, rows)
        + (f"<ul class='warnings'>{notes}</ul>" if notes else "")
    )


def sharing_html(
    summary: Mapping[str, Any], state: dict[str, bool], fig: Callable[[Any], str] | None = None
) -> str:
    """The section's HTML; ``fig`` draws one plotly figure (viz/html.py's, so plotly.js is inlined once)."""
    sec = summary.get("sharing") or {"note": "no sharing figures in this summary"}
    if "note" in sec:
        return _note(sec["note"])
    if fig is None:
        import plotly.io as pio

        def fig(f: Any) -> str:
            include = not state.get("plotlyjs_included", False)
            state["plotlyjs_included"] = True
            return pio.to_html(f, full_html=False, include_plotlyjs=include, config={"displaylogo": False})

    return "\n".join(
        [
            "<h3>Co-location estimate</h3>",
            _estimate(sec["estimate"]),
            "<h3>GPU memory</h3>",
            _memory(sec["memory"], fig),
            "<h3>Kernel occupancy</h3>",
            _occupancy(sec["occupancy"]),
            "<h3>Kernel lengths</h3>",
            _lengths(sec["kernel_lengths"], fig),
        ]
    )
