"""Post-import hooks: run a callback once a module is imported, without importing it ourselves.

Keeps heavy libraries (torch, gymnasium) out of processes that never use them, while still
instrumenting them when the user's code imports them.
"""

from __future__ import annotations

import importlib.abc
import sys
import warnings
from collections.abc import Callable
from typing import Any

_pending: dict[str, list[Callable[[Any], None]]] = {}


def _run(callback: Callable[[Any], None], module: Any) -> None:
    try:
        callback(module)
    except Exception as e:  # instrumentation failing must not break the user's import
        warnings.warn(f"rlscope: could not instrument {module.__name__}: {e}", stacklevel=3)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in _pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            loader = spec.loader
            if loader is None or not hasattr(loader, "exec_module"):
                return spec
            original = loader.exec_module

            def exec_module(module: Any, __orig: Any = original, __name: str = fullname) -> None:
                __orig(module)
                for cb in _pending.pop(__name, []):
                    _run(cb, module)

            loader.exec_module = exec_module  # type: ignore[method-assign]
            return spec
        return None


_finder = _Finder()


def when_imported(name: str, callback: Callable[[Any], None]) -> None:
    """Call ``callback(module)`` now if ``name`` is imported, else right after its first import."""
    module = sys.modules.get(name)
    if module is not None:
        _run(callback, module)
        return
    _pending.setdefault(name, []).append(callback)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def cancel(name: str, callback: Callable[[Any], None]) -> None:
    """Forget a pending callback (the session stopped before the module was imported)."""
    cbs = _pending.get(name, [])
    if callback in cbs:
        cbs.remove(callback)
