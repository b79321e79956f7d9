"""``rlscope.check_trace``: a validator with readable findings, in the spirit of gymnasium's check_env."""

from __future__ import annotations

import dataclasses

import numpy as np

from rlscope.errors import TraceError
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessTrace, load_trace


@dataclasses.dataclass(frozen=True)
class Finding:
    """One thing worth knowing about a trace: ``error`` (unusable), ``warning`` or ``info``."""

    level: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.level}: {self.where}: {self.message}"


def _signal_name(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _check_process(p: ProcessTrace) -> list[Finding]:
    out: list[Finding] = []
    where = str(p.path)
    ev = p.events
    warnings = [w.removeprefix(f"{p.path}: ") for w in p.warnings]
    if ev.num_rows == 0:
        # a process ended (by its parent, say) before its session wrote anything: nothing to analyze
        # in it, and nothing wrong with the rest of the trace; the reader's warning says the same,
        # and with no events to name, a names file it could not read does not matter either
        notes = [w for w in warnings if not w.startswith("no events") and S.NAMES_FILE not in w]
        return [
            *[Finding("warning", where, w) for w in notes],
            Finding("info", where, "no events: the process ended before its session recorded anything"),
        ]
    out += [Finding("warning", where, w) for w in warnings]
    ts = ev.column("ts_ns").to_numpy()
    thread = ev.column("thread").to_numpy()
    kind = ev.column("kind").to_numpy()
    name = ev.column("name").to_numpy()
    flags = ev.column("flags").to_numpy()
    if not (kind == S.SESSION_START).any():
        out.append(Finding("warning", where, "no session start event"))
    # a session end's id: the signal that ended the process after rlscope flushed it (its parent
    # terminated it: Pool.terminate, a pool or daemonic children closed at exit), -1 for none
    signals = sorted({int(i) for i in ev.column("id").to_numpy()[kind == S.SESSION_END] if i > 0})
    for signum in signals:
        message = f"ended by {_signal_name(signum)} (terminated by its parent?); its trace was flushed first"
        out.append(Finding("info", where, message))
    for t in np.unique(thread):
        sel = thread == t
        if (np.diff(ts[sel]) < 0).any():
            out.append(Finding("error", where, f"thread {t}: timestamps go backwards"))
    n_begin = int((kind == S.OP_BEGIN).sum())
    n_end = int((kind == S.OP_END).sum())
    if n_begin != n_end:
        out.append(Finding("warning", where, f"{n_begin - n_end} operation(s) begun but never ended"))
    forced = int(((flags & S.FLAG_FORCED_CLOSE) > 0).sum())
    if forced:
        out.append(Finding("info", where, f"{forced} scope(s) were still open and closed by rlscope"))
    used = name[name >= 0]
    if len(used) and int(used.max()) >= len(p.names):
        out.append(Finding("warning", where, "some events name ids missing from names.arrows"))
    return out


def check_trace(trace_dir: str) -> list[Finding]:
    """Findings about a trace directory; an empty list means nothing is wrong with it."""
    try:
        trace = load_trace(trace_dir)
    except TraceError as e:
        return [Finding("error", str(e.path), e.problem)]
    return [f for p in trace.processes for f in _check_process(p)]
