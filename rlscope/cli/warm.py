"""The end-of-run report's imports, done while the program runs.

``rlscope run`` waits on the program, then analyzes its trace and prints the report. Importing the
analysis and the renderers (numpy, pyarrow, and pyarrow's probe for pandas at its first array, with
the analysis's own modules) is most of that report's time on a short run: about 0.6 s of 0.75 s on
a 2-core VM for a 20-second PPO. Done in a thread of the launcher while the program runs, when the
launcher only waits, that time is off the run's wall. The modules listed are those the analysis and
the report import on first use (tests/test_cli.py checks that nothing is left to import after).
"""

from __future__ import annotations

import importlib
import threading

from rlscope.cli.pandas_probe import skip_pandas_probe

MODULES = (
    "numpy",
    "numpy.ma",  # pyarrow.array of a numpy array checks for a masked one
    "pyarrow",
    "pyarrow.compute",
    "pyarrow._acero",  # the aggregates' sums (rlscope.trace.reader.sum_by)
    "rlscope.analysis.result",
    "rlscope.analysis.advice",
    "rlscope.analysis.compilation",
    "rlscope.analysis.device_scopes",
    "rlscope.analysis.gpu_calls",
    "rlscope.analysis.intervals",
    "rlscope.analysis.kernels",
    "rlscope.analysis.nccl",
    "rlscope.analysis.parallel",
    "rlscope.analysis.parts",
    "rlscope.analysis.report",
    "rlscope.analysis.sharing",
    "rlscope.analysis.stacks",
    "rlscope.analysis.summary",
    "rlscope.analysis.whatif",
    "rlscope.analysis.whole_run",
    "rlscope.overhead.correct",
    "rlscope.overhead.correct.calibration",
    "rlscope.progress",
    "rlscope.trace.budget",
    "rlscope.trace.reader",
    "rlscope.trace.runs",
    "rlscope.cli.output",
    "rlscope.viz.terminal",
    "rlscope.viz.first_screen",
    "rlscope.viz.html",
    "rlscope.viz.data_files",
)


def warm() -> None:
    """Import :data:`MODULES` and make pyarrow's probe for pandas (answered absent:
    rlscope/cli/pandas_probe.py); any failure is left for the report itself to meet and say."""
    try:
        for name in MODULES:
            importlib.import_module(name)
        skip_pandas_probe()
    except Exception:  # an optimization only: the report imports what it needs, and says what fails
        return


def start() -> threading.Thread:
    """:func:`warm` in a daemon thread; :func:`finish` waits for it."""
    t = threading.Thread(target=warm, name="rlscope-warm-report", daemon=True)
    t.start()
    return t


def finish(t: threading.Thread) -> None:
    """Wait for the imports of :func:`start`'s thread to end, once the program has ended.

    Why: a program shorter than the imports (a shell command, a script that fails at once) would
    have the launcher exit while the thread is inside an extension module's import, and an
    interpreter finalizing under such a thread can abort (``Fatal Python error:
    PyGILState_Release``), losing the program's exit status. The report imports the same modules
    right after, so the wait costs the run nothing."""
    t.join()
