"""Put on the PYTHONPATH of the program ``rlscope run`` profiles (and ``rlscope validate`` measures):
profile this interpreter.

A file of the installed package, not a temporary one: a process that starts after ``rlscope run``
returned (a helper its program left behind) still finds it. A ``sitecustomize`` of the user's own
(the distribution's, a virtualenv's), which this one shadows, still runs after it: profiling must
not change what the program's interpreter does.
"""

import os
import sys

try:
    from rlscope.runtime import hooks

    hooks.run_boot_hook()  # a launching tool's code first (a child run of `rlscope validate`: its timers)
    import rlscope.runtime.autorun  # noqa: F401  (importing it starts the session: rlscope/runtime/autorun.py)
except Exception as e:  # never stop the user's program
    print(f"rlscope: this process is not profiled: {e}", file=sys.stderr)


def _run_the_shadowed_sitecustomize() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    _run_the_shadowed_sitecustomize()
except Exception as e:  # as Python itself does for a failing sitecustomize: say it and go on
    print(f"Error in sitecustomize:\n{type(e).__name__}: {e}", file=sys.stderr)
