"""Nesting depth from parent links (analysis/intervals._depth) against a walk up the links, for ids
used as they are (compact) and ids spread wide, and bounded on a cycle no valid trace has."""

from __future__ import annotations

import numpy as np
import pytest

from rlscope.analysis.intervals import _depth


def _walk(ident: np.ndarray, parent: np.ndarray) -> list[int]:
    up = dict(zip(ident.tolist(), parent.tolist(), strict=True))
    out = []
    for p in parent.tolist():
        d = 0
        while p >= 0:
            d += 1
            p = up.get(p, -1)
        out.append(d)
    return out


def _forest(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    ident = rng.permutation(n).astype(np.int64)
    parent = np.full(n, -1, np.int64)
    for k in range(1, n):  # each instance's parent one begun before it, or none
        if rng.random() < 0.8:
            parent[k] = ident[rng.integers(0, k)]
    return ident, parent


@pytest.mark.parametrize("spread", [1, 10**9])
@pytest.mark.parametrize("seed", range(5))
def test_depth_is_the_walk_up_the_parent_links(seed, spread):
    ident, parent = _forest(np.random.default_rng(seed), 300)
    ident, parent = ident * spread, np.where(parent >= 0, parent * spread, -1)
    parent[0] = 7 * spread + 12_345  # a parent that is no instance here: one link, then none
    assert _depth(ident, parent).tolist() == _walk(ident, parent)


def test_a_cycle_ends_with_a_bounded_depth():
    ident = np.arange(1000, dtype=np.int64)
    parent = np.roll(ident, 1)  # every instance its own ancestor
    depth = _depth(ident, parent)
    assert len(depth) == 1000 and (depth > 0).all()
