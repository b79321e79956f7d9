"""How far the windows' cost estimate moves when the core's speed moves within a run: a simulation.

    python benchmarks/window_noise.py [--trials 60] [--seconds 5] [--seed 0]

Why: against a twin process on the same core (`benchmarks/lockstep.py`), the H100's eager simulator
read its corrected figure at +4% to +7% on a quiet machine and at −9% to +13% on a noisy one, where
one core's iteration time moved between 0.9 and 3.5 ms within a minute. This asks whether another
way of pairing windows would hold better, on a model of that noise: back-to-back instances of
1.6 ms times the core's speed (log-normal, an Ornstein-Uhlenbeck process with correlation time
``tau`` and spread ``sigma``) times 1 + ``c`` in full windows (c = 0.65, the eager step's full
windows), 5% instance noise, windows alternating with random lengths around 0.25 s. Estimators of
``c`` (the relative excess), each a median over the run's pairs:

- ``A`` (rlscope/overhead/correct/windows.py's): each full window's median instance over the mean of its
  light neighbours' medians;
- ``B``: each switch, the ``K`` instances before it against the ``K`` after it (the first ``S``
  after a switch skipped: the switch's transient);
- ``C``: each full window's median over its light neighbours' ``K`` instances next to it.

Printed: each estimator's bias and standard deviation over the trials. The corrected figure's error
is about the full windows' share times that deviation over 1 + c. Results: BENCHMARKS.md §9,
sixteenth session.
"""

from __future__ import annotations

import argparse

import numpy as np

W, C, L, K, S = 1.6e-3, 0.65, 0.25, 20, 30


def _trial(rng: np.random.Generator, tau: float, sigma: float, seconds: float) -> dict[str, float]:
    edges, mode = [0.0], [0]
    while edges[-1] < seconds:
        edges.append(edges[-1] + L * (0.3 + rng.exponential(0.7)))
        mode.append(1 - mode[-1])
    edges_a, mode_a = np.array(edges), np.array(mode[:-1])
    dt = 0.01
    n = int(seconds / dt) + 2
    a = np.exp(-dt / tau)
    z = np.zeros(n)
    for i in range(1, n):
        z[i] = a * z[i - 1] + np.sqrt(1 - a * a) * rng.standard_normal()
    t, ts, ds = 0.0, [], []
    while t < seconds:
        wi = min(int(np.searchsorted(edges_a, t, side="right")) - 1, len(mode_a) - 1)
        d = W * np.exp(sigma * z[int(t / dt)]) * (1 + C * mode_a[wi]) * (1 + 0.05 * rng.standard_normal())
        ts.append(t)
        ds.append(d)
        t += d
    d_a = np.array(ds)
    win = np.searchsorted(edges_a, np.array(ts), side="right") - 1
    nw = int(win.max()) + 1
    members = [np.flatnonzero(win == j) for j in range(nw)]
    med = np.array([np.median(d_a[m]) if len(m) >= 3 else np.nan for m in members])
    wm = mode_a[:nw]
    rel_a, rel_b, rel_c = [], [], []
    for j in range(nw):
        if wm[j] == 1 and not np.isnan(med[j]):
            nb = [med[k] for k in (j - 1, j + 1) if 0 <= k < nw and not np.isnan(med[k])]
            if nb:
                rel_a.append(med[j] / np.mean(nb) - 1)
            edge = []
            if j >= 1 and len(members[j - 1]) >= K:
                edge.append(np.median(d_a[members[j - 1][-K:]]))
            if j + 1 < nw and len(members[j + 1]) >= K + S:
                edge.append(np.median(d_a[members[j + 1][S : S + K]]))
            if edge:
                rel_c.append(med[j] / np.mean(edge) - 1)
        if j >= 1 and len(members[j]) >= S + K and len(members[j - 1]) >= K:
            before, after = np.median(d_a[members[j - 1][-K:]]), np.median(d_a[members[j][S : S + K]])
            rel_b.append(after / before - 1 if wm[j] == 1 else before / after - 1)
    return {k: float(np.median(v)) if v else np.nan for k, v in (("A", rel_a), ("B", rel_b), ("C", rel_c))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=60)
    p.add_argument("--seconds", type=float, default=5.0, help="the run's length")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"estimates of c = {C} (full windows' excess), {args.seconds:g} s runs, {args.trials} trials")
    for tau in (0.05, 0.15, 0.5, 2.0):
        for sigma in (0.1, 0.2):
            got = [_trial(rng, tau, sigma, args.seconds) for _ in range(args.trials)]
            cells = []
            for k in ("A", "B", "C"):
                v = np.array([g[k] for g in got])
                cells.append(f"{k} bias {np.nanmean(v) - C:+.3f} sd {np.nanstd(v):.3f}")
            print(f"tau {tau:4} s sigma {sigma}: " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
