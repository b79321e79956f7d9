"""A run's figure summed from its processes' parts (stack samples, compilations, device scopes)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar


class Part(Protocol):
    def add(self, other: ...) -> None: ...  # type: ignore[misc]


P = TypeVar("P", bound=Part)


def summed(parts: Iterable[P | None], new: Callable[[], P]) -> P | None:
    """Every process's part added into a ``new()`` one; None where no process has any."""
    got = [p for p in parts if p is not None]
    if not got:
        return None
    out = new()
    for p in got:
        out.add(p)
    return out
