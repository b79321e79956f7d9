"""Errors rlscope raises for bad input; the CLI turns them into one-line messages."""

from __future__ import annotations


class RLScopeError(Exception):
    """Base class: a problem the user can fix, reported without a traceback."""


class TraceError(RLScopeError):
    """A trace directory or file that cannot be read (missing, corrupt, wrong schema)."""

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
