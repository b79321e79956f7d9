"""Check rlscope's corrected figures against the program run without it (``rlscope validate``).

The public entry is :func:`main` (the command) and :func:`run` (a validation from parsed options).
The parts: ``cli`` (options, exit status), ``options``, ``runner`` (the child processes of every
mode), ``child`` (inside a child: each mode's session and the record), ``aggregate`` (the plain
timers' arithmetic), ``verdict`` (statistics and PASS / FAIL / INCONCLUSIVE), ``render`` (the
table), ``twin`` (timed and profiled runs in turns), ``speed_match`` and ``hoststat``.

Imported lazily: a measured child imports ``child`` alone, and pays for nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlscope.overhead.validate.options import Options


def main(argv: list[str]) -> int:
    """``rlscope validate ARGS``: 0 when the corrected profile is within tolerance, 1 when not."""
    from rlscope.overhead.validate import cli

    return cli.main(argv)


def run(opts: Options, log: Any = lambda msg: None, started: float | None = None) -> dict[str, Any]:
    """Run the validation ``opts`` describes; its result (the JSON ``--json`` writes)."""
    from rlscope.overhead.validate import runner

    return runner.validate(opts, log, started)
