"""The automatic operations' module calls, counted per thread and operation: ``module_calls.arrows``.

Under automatic operations every ``nn.Module`` call goes through rlscope's wrapper
(rlscope/runtime/auto_ops.py), 1-2 us of Python each on a 2-core VM: a dozen a step in a small
policy's inference. No window measures it (it is paid in light windows too), so the analysis
removes it per call at the calibrated ``module_call`` cost (rlscope/overhead/correct/module_calls.py).
Counting is cheap: the wrapper counts calls per thread, each outermost call adds its count to the
innermost operation open then, and at every flush this collector writes what each (thread, operation)
gained since the last one: a row per pair, not per call.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

from rlscope.runtime import auto_ops
from rlscope.trace import schema as S


class ModuleCallCounter:
    """Writes each flush's new module calls per (thread, operation) to the session's stream."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.rows: collections.deque[tuple] | None = None
        self.last: dict[tuple[int, int], int] = {}  # (thread, name id) -> calls already written

    def start(self) -> ModuleCallCounter:
        writer = self.session.writer
        self.rows = writer.add_stream(S.MODULE_CALLS_FILE, S.columns_schema(S.MODULE_CALLS_COLUMNS_DOC))
        self.last = self._totals()  # calls made before the session are none of its
        writer.before_flush(self.collect)
        return self

    @staticmethod
    def _totals() -> dict[tuple[int, int], int]:
        out: dict[tuple[int, int], int] = {}
        for tid, counts in auto_ops.module_call_counts():
            for nid, n in counts.items():
                out[(tid, nid)] = out.get((tid, nid), 0) + n
        return out

    def collect(self) -> None:
        """Append the calls made since the last collection (the writer's before-flush hook)."""
        if self.rows is None:
            return
        now = self.session.clock()
        totals = self._totals()
        for (tid, nid), n in totals.items():
            new = n - self.last.get((tid, nid), 0)
            if new > 0:
                self.rows.append((now, tid, nid, new))
        self.last = totals

    def stop(self) -> None:
        self.collect()  # the writer's last flush comes after the collectors stop

    def __repr__(self) -> str:
        return "ModuleCallCounter()"


def start_for(session: Any, started: Sequence[Any]) -> ModuleCallCounter | None:
    """The registry's factory (rlscope/collectors/registry.py): with automatic operations only."""
    if not session.options.get("auto_ops"):
        return None
    return ModuleCallCounter(session).start()
