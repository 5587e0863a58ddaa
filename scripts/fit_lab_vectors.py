"""Fit the small Q, K, V vectors behind the "river bank" lab example.

The lab text quotes figures (attention weights, effective tokens, outputs, ...)
for "She sat by the river bank".  This finds 6x4 queries and keys and 6x2
values that reproduce every figure, rounds them to 2 decimals so they stay
readable, checks every figure again on the rounded numbers (and on their
float32 copies, as the browser sees them), prints the table and writes
src/attnwidget/data/lab.json.  Deterministic; exits with an error on any miss.
Takes a few seconds.  From the repository root:

    python scripts/fit_lab_vectors.py    # rewrites src/attnwidget/data/lab.json
"""

import json
import os
import pathlib
import sys

# The matrices are tiny: BLAS worker threads only add overhead (2x slower or worse).
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
from scipy.optimize import least_squares

SENTENCE = "She sat by the river bank"
TOKENS = SENTENCE.split()
N, DK, RIVER, BANK = 6, 4, 4, 5
OUT = pathlib.Path(__file__).resolve().parents[1] / "src/attnwidget/data/lab.json"

# W[bank,river] and W[bank,bank] at T=1 and T=0.2 are coupled through one score
# difference: the quoted values only fit together if S[bank,river] - S[bank,bank]
# lies in a window ~0.0007 wide around 0.595, leaving at most ~0.00007 between
# these four figures and their rounding edges.  They get that smaller margin;
# the others keep a third of the rounding half-interval (+-0.00017 at 3 decimals).
TIGHT = 0.00003
TARGETS = {  # name: (quoted value, decimals, margin to the rounding edge)
    "min score": (-1.0, 1, None),
    "max score": (2.8, 1, None),
    "W[bank,river] T=1": (0.556, 3, TIGHT),
    "W[bank,bank] T=1": (0.306, 3, TIGHT),
    "eff. tokens bank": (3.13, 2, None),
    "O[bank] x": (0.69, 2, None),
    "O[bank] y": (0.23, 2, None),
    "spread T=1": (0.503, 3, None),
    "spread T=5": (0.049, 3, None),
    "W[bank,river] T=0.2": (0.951, 3, TIGHT),
    "W[bank,bank] T=0.2": (0.049, 3, TIGHT),
}
UNIT = {n: 10.0**-dec for n, (_, dec, _) in TARGETS.items()}
TOL = {n: UNIT[n] / 2 - (m or UNIT[n] / 6) for n, (_, _, m) in TARGETS.items()}
# The fit aims at the quoted values, but at the centre of the narrow window for the pair at T=1.
AIM = {n: t for n, (t, _, _) in TARGETS.items()}
AIM.update({"W[bank,river] T=1": 0.55557, "W[bank,bank] T=1": 0.30643})
QK_FIGURES = [n for n in TARGETS if not n.startswith(("O[", "spread"))]  # need no V
# Layout the values are pulled towards (axis 0 = river/water sense, axis 1 = money
# sense), firmly for the function words, which should stay mid-way.
V_PRIOR = np.array([[0.2, 0.3], [0.3, 0.2], [0.4, 0.3], [0.35, 0.35], [0.9, 0.0], [0.5, 0.6]])
PRIOR_W = np.array([1, 1, 10, 10, 1, 1])[:, None]


def unpack(x):
    """Parameter vector(s) [Q, K, V without V[river,1]] -> Q, K, V; batches work too."""
    lead = x.shape[:-1]
    v = np.insert(x[..., 48:], 2 * RIVER + 1, 0.0, axis=-1)  # V[river] lies on axis 0
    return (x[..., :24].reshape(lead + (N, DK)), x[..., 24:48].reshape(lead + (N, DK)), v.reshape(lead + (N, 2)))


def scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(DK)


def softmax(s, temp):
    e = np.exp((s - s.max(axis=-1, keepdims=True)) / temp)
    return e / e.sum(axis=-1, keepdims=True)


def figures(s, v):
    def spread(o):  # largest distance between any two output rows
        return np.linalg.norm(o[..., :, None, :] - o[..., None, :, :], axis=-1).max(axis=(-2, -1))

    w1, w02 = softmax(s, 1.0), softmax(s, 0.2)
    o, wb = w1 @ v, w1[..., BANK, :]
    return {
        "min score": s.min(axis=(-2, -1)),
        "max score": s.max(axis=(-2, -1)),
        "W[bank,river] T=1": wb[..., RIVER],
        "W[bank,bank] T=1": wb[..., BANK],
        "eff. tokens bank": np.exp(-(wb * np.log(wb)).sum(axis=-1)),
        "O[bank] x": o[..., BANK, 0],
        "O[bank] y": o[..., BANK, 1],
        "spread T=1": spread(o),
        "spread T=5": spread(softmax(s, 5.0) @ v),
        "W[bank,river] T=0.2": w02[..., BANK, RIVER],
        "W[bank,bank] T=0.2": w02[..., BANK, BANK],
    }


def requirements(s, v):
    """The qualitative requirements: {name: (value, lowest allowed, highest allowed)}."""
    out = {}
    for i in range(N):  # whose key wins each row, and by how much over the runner-up
        win = RIVER if i in (3, BANK) else i
        lead = s[..., i, win] - np.delete(s[..., i, :], win, axis=-1).max(axis=-1)
        out[f"{TOKENS[i]} row: {TOKENS[win]} leads by"] = (lead, 0.1, np.inf)
    # asymmetry: river barely reads bank, while bank reads river at 0.556
    out["W[river,bank] T=1"] = (softmax(s, 1.0)[..., RIVER, BANK], -np.inf, 0.15)
    # river is clearly the furthest out on the water axis; bank lies between the axes
    others = np.delete(v[..., :, 0], RIVER, axis=-1).max(axis=-1)
    out["V[river,0] leads by"] = (v[..., RIVER, 0] - others, 0.2, np.inf)
    out["V[bank] smaller coord."] = (v[..., BANK, :].min(axis=-1), 0.2, np.inf)
    return out


def slacks(s, v):  # how far inside its bounds each requirement is
    return [np.minimum(val - lo, hi - val) for val, lo, hi in requirements(s, v).values()]


def residuals(s, v, extra):
    f = figures(s, v)
    r = [(f[n] - AIM[n]) / UNIT[n] for n in TARGETS]
    r += [30 * max(0.0, 0.05 - g) for g in slacks(s, v)]  # keep headroom for rounding
    return np.concatenate([r, (PRIOR_W * (v - V_PRIOR)).ravel(), extra])


def fit_scores(seed):
    """Fit a free 6x6 score matrix S (and V) first: softmax(S) is a far easier
    landscape than softmax(Q K^T).  A penalty on its 5th and 6th singular values
    keeps S near rank 4, so its truncated SVD gives a good start for Q and K."""

    def res(z):
        s = z[:36].reshape(N, N)
        v = unpack(np.concatenate([np.zeros(48), z[36:]]))[2]
        return residuals(s, v, 3 * np.linalg.svd(s, compute_uv=False)[DK:])

    rng = np.random.default_rng(seed)
    z0 = np.concatenate([rng.normal(0, 0.5, 36), np.delete(V_PRIOR.ravel(), 2 * RIVER + 1)])
    z = least_squares(res, z0, max_nfev=200).x
    u, sv, vt = np.linalg.svd(z[:36].reshape(N, N))
    root = np.sqrt(sv[:DK] * np.sqrt(DK))  # then Q K^T / sqrt(d_k) = truncated S
    return np.concatenate([(u[:, :DK] * root).ravel(), (vt[:DK].T * root).ravel(), z[36:]])


def fit(x, free):
    """Refine the entries x[free] of Q, K, V (with a weak pull to small Q, K)."""

    def res(xf):
        y = x.copy()
        y[free] = xf
        q, k, v = unpack(y)
        return residuals(scores(q, k), v, 0.02 * y[:48])

    x = x.copy()
    x[free] = least_squares(res, x[free], max_nfev=150).x  # close enough before rounding
    return x


def badness(x, names):
    """Batched score for the grid search: tolerance overshoot, sharply weighted."""
    q, k, v = unpack(x)
    s = scores(q, k)
    f = figures(s, v)
    cost = sum((np.abs(f[n] - TARGETS[n][0]) / TOL[n]) ** 6 for n in names)
    return cost + 1e6 * sum(np.maximum(0.0, -g) for g in slacks(s, v))


def grid_search(cents, names, free):
    """Steepest descent on the 0.01 grid (whole hundredths, so no float drift),
    moving one or two of the entries in free by +-0.01 at a time."""
    one = np.eye(len(cents), dtype=int)[free]
    singles = np.vstack([one, -one])
    i, j = np.triu_indices(len(singles), 1)
    pairs = singles[i] + singles[j]
    pairs = pairs[np.abs(pairs).sum(axis=1) == 2]  # drop a move undone by its opposite
    best = badness(cents / 100, names)
    while True:
        for moves in (singles, pairs):
            cost = badness((cents + moves) / 100, names)
            if cost.min() < best:
                cents, best = cents + moves[cost.argmin()], cost.min()
                break
        else:
            return cents


def solve(seed):
    """Rounding to 0.01 moves the figures far more than their tolerances, so: fit
    everything, put Q and K on the grid (they alone fix the tight attention
    figures), refit V to the rounded Q, K and put V on the grid.  V enters the
    outputs linearly, weighted by attention, so its grid is fine enough there."""
    qk, vi = np.arange(48), np.arange(48, 59)
    x = fit(fit_scores(seed), np.arange(59))
    cents = grid_search(np.round(x * 100).astype(int), QK_FIGURES, qk)
    cents[vi] = np.round(fit(cents / 100, vi)[vi] * 100)
    return grid_search(cents, list(TARGETS), vi) / 100


def check(x, show=False):
    """Every figure and requirement holds, for the rounded numbers and for their
    float32 copies (what the browser gets); optionally print the table."""
    ok = True
    for dtype in (np.float32, np.float64):  # float64 last: that table is printed
        q, k, v = (a.astype(dtype).astype(np.float64) for a in unpack(x))
        f, req = figures(scores(q, k), v), requirements(scores(q, k), v)
        rows = [
            (n, f[n], f"~ {t}", abs(f[n] - t) <= TOL[n] and round(float(f[n]), dec) == t)
            for n, (t, dec, _) in TARGETS.items()
        ]
        rows += [
            (n, val, f">= {lo}" if hi == np.inf else f"<= {hi}", lo - 1e-6 <= val <= hi + 1e-6)
            for n, (val, lo, hi) in req.items()
        ]  # 1e-6: float fuzz on the 0.01 grid
        ok &= all(hit for *_, hit in rows)
    if show:
        for n, val, want, hit in rows:
            print(f"{n:26s} {val:9.5f}  {want:8s} {'ok' if hit else 'MISS'}")
        print("float32 round trip:", "ok" if ok else "MISS")
    return ok


def main():
    for seed in range(10):  # fixed seeds in a fixed order: the result is reproducible
        x = solve(seed)
        if check(x):
            break
    if not check(x, show=True):
        sys.exit("no seed met every target; lab.json not written")
    q, k, v = (a.round(2).tolist() for a in unpack(x))
    data = {"sentence": SENTENCE, "tokens": TOKENS, "q": q, "k": k, "v": v}
    OUT.write_text(json.dumps(data) + "\n")
    print(f"seed {seed}; wrote {OUT}")


if __name__ == "__main__":
    main()
