"""Errors rlscope raises for bad input; the CLI turns them into one-line messages."""

from __future__ import annotations

# what to install for Ray: said by the Ray integration (rlscope.ray) and by the analysis on a Ray cluster
RAY_INSTALL_HINT = 'profiling Ray jobs needs Ray: pip install "rlscope[ray]"'


class RLScopeError(Exception):
    """Base class: a problem the user can fix, reported without a traceback."""


class TraceError(RLScopeError):
    """A trace directory or file that cannot be read (missing, corrupt, wrong schema)."""

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self) -> tuple[type, tuple[object, str]]:
        # rebuilt from (path, problem), not from the message: it crosses process boundaries (pool, Ray)
        return (type(self), (self.path, self.problem))


# Messages already printed by this process or an ancestor of it in the same run: children inherit
# the environment, so a warning that every worker of a Pool would repeat prints once per run.
_WARNED_ENV = "RLSCOPE_WARNED"


def warn_once(message: str) -> None:
    """One line on stderr per distinct message and run (processes started later inherit what was said).

    The message is shown through :func:`rlscope.text.printable`: it may hold names and paths.
    Never raises: it is called from collectors' start-up and exit hooks.
    """
    import contextlib
    import os
    import sys
    import zlib

    from rlscope.text import printable

    key = format(zlib.crc32(message.encode(errors="surrogatepass")), "x")  # a path may hold any bytes
    seen = [k for k in os.environ.get(_WARNED_ENV, "").split(",") if k]
    if key in seen:
        return
    with contextlib.suppress(Exception):  # stderr closed at exit; environ immutable in odd embeddings
        os.environ[_WARNED_ENV] = ",".join([*seen, key])
        print(f"rlscope: warning: {printable(message)}", file=sys.stderr, flush=True)
