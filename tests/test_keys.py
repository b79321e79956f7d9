"""The hashed distinct values equal numpy's sorted ones (rlscope/keys.py), on random and edge arrays."""

from __future__ import annotations

import numpy as np
import pytest

from rlscope.keys import distinct, distinct_times, factorize, factorize_rows


@pytest.mark.parametrize("n", [0, 5, 5000])
@pytest.mark.parametrize("spread", [3, 1000, 10**12])
def test_factorize_equals_np_unique(n: int, spread: int) -> None:
    values = np.random.default_rng(n + spread).integers(-spread, spread, n)
    uniq, inverse = factorize(values)
    want_u, want_i = np.unique(values, return_inverse=True)
    assert uniq.tolist() == want_u.tolist()
    assert inverse.tolist() == want_i.reshape(-1).tolist()
    assert distinct(values).tolist() == want_u.tolist()
    assert distinct_times(values).tolist() == want_u.tolist()
    runs = np.concatenate([np.sort(values), np.sort(values[: n // 3])])  # sorted runs, repeats
    assert distinct_times(runs).tolist() == want_u.tolist()


@pytest.mark.parametrize("n", [0, 7, 4000])
def test_factorize_rows_equals_np_unique_by_column(n: int) -> None:
    rows = np.random.default_rng(n).integers(-3, 9, (3, n))
    out, inverse = factorize_rows(rows)
    want_o, want_i = np.unique(rows, axis=1, return_inverse=True)
    assert out.tolist() == want_o.tolist()
    assert inverse.tolist() == want_i.reshape(-1).tolist()
