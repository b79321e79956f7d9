"""``rlscope.check_trace``: a validator with readable findings, in the spirit of gymnasium's check_env.

It reads the trace as every analysis does (:func:`rlscope.trace.reader.load_trace`), so its findings
are the reader's: what :mod:`rlscope.trace.validate` found and repaired in each process's events
(``error``: damage, the analysis drops or changes rows, as each finding says), what could not be
read (``warning``), and a few notes (``info``).
"""

from __future__ import annotations

from rlscope.errors import TraceError
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessTrace, load_trace
from rlscope.trace.validate import Finding

__all__ = ["Finding", "check_trace"]


def _signal_name(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _check_process(p: ProcessTrace) -> list[Finding]:
    where = str(p.path)
    said = {f.warning for f in p.findings}
    warnings = [w.removeprefix(f"{p.path}: ") for w in p.warnings if w not in said]
    ev = p.events
    if ev.num_rows == 0:
        # a process ended (by its parent, say) before its session wrote anything: nothing to analyze
        # in it, and nothing wrong with the rest of the trace; the reader's warning says the same,
        # and with no events to name, a names file it could not read does not matter either
        notes = [w for w in warnings if not w.startswith("no events") and S.NAMES_FILE not in w]
        return [
            *p.findings,
            *[Finding("warning", where, w) for w in notes],
            Finding("info", where, "no events: the process ended before its session recorded anything"),
        ]
    out = [*p.findings, *[Finding("warning", where, w) for w in warnings]]
    kind = ev.column("kind").to_numpy()
    if not (kind == S.SESSION_START).any():
        out.append(Finding("warning", where, "no session start event"))
    # a session end's id: the signal that ended the process after rlscope flushed it (rlscope run
    # forwarding a SIGTERM or SIGHUP, a parent ending its children: Pool.terminate, daemonic children
    # at exit, a closed terminal), -1 for none
    signals = sorted({int(i) for i in ev.column("id").to_numpy()[kind == S.SESSION_END] if i > 0})
    for signum in signals:
        message = f"ended by {_signal_name(signum)}; its trace was flushed first"
        out.append(Finding("info", where, message))
    n_open = int((kind == S.OP_BEGIN).sum() - (kind == S.OP_END).sum())
    if n_open > 0 and not p.complete:
        out.append(Finding("warning", where, f"{n_open} operation(s) still open where the data ends"))
    forced = int(((ev.column("flags").to_numpy() & S.FLAG_FORCED_CLOSE) > 0).sum())
    if forced:
        out.append(Finding("info", where, f"{forced} scope(s) were still open and closed by rlscope"))
    name = ev.column("name").to_numpy()
    scoped = (kind == S.OP_BEGIN) | (kind == S.PHASE_BEGIN)
    if scoped.any() and int(name[scoped].max()) >= len(p.names):
        out.append(Finding("warning", where, "some events name ids missing from names.arrows"))
    return out


def check_trace(trace_dir: str) -> list[Finding]:
    """Findings about a trace directory; an empty list means nothing is wrong with it."""
    try:
        trace = load_trace(trace_dir)
    except TraceError as e:
        return [Finding("error", str(e.path), e.problem)]
    return [f for p in trace.processes for f in _check_process(p)]
