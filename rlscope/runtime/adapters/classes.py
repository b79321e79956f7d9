"""What the adapters patch: a library's class and every subclass of it loaded so far."""

from __future__ import annotations


def subclasses(cls: type) -> list[type]:
    """``cls`` and all its subclasses, depth first (a user's subclass of PPO is PPO to an adapter)."""
    out, todo = [], [cls]
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(c.__subclasses__())
    return out
