"""What ``rlscope.profile`` returns inside a program that ``rlscope run`` already profiles."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlscope import annotate
from rlscope.errors import warn_once

if TYPE_CHECKING:
    from rlscope.session import Session


class RunSession:
    """What ``rlscope.profile`` returns inside a program already profiled by ``rlscope run``.

    Why: the run's session (rlscope/runtime/autorun.py) started before the program's first line, and
    one process runs one session at a time; a program that profiles itself (``--trace-dir`` in the
    bundled workloads) must not crash because it is run under ``rlscope run``. Its scopes go to the
    run's trace; this object only stands in for the session it asked for, and says so once.
    """

    def __init__(self, run: Session, asked: str | os.PathLike[str]) -> None:
        self.run = run
        self.trace_dir = run.trace_dir
        self.asked = Path(asked)

    @property
    def active(self) -> bool:
        return annotate._active is self.run

    def start(self) -> RunSession:
        warn_once(
            f"rlscope: rlscope run already profiles this program into {self.run.trace_dir};"
            f" rlscope.profile({str(self.asked)!r}) records there too and writes no trace of its own"
        )
        return self

    def stop(self) -> None:
        """The run's session ends with the program, not here."""

    def __enter__(self) -> RunSession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __getattr__(self, name: str) -> Any:  # add_toggler, clock, options ...: the run's
        return getattr(self.run, name)
