"""Pieces of the main thread's time between boundaries that every window records: instances for the
windows' comparison where an operation's own instances are too few, and for the unannotated time.

Why: the windows compare an operation's instances in full and light windows
(:mod:`rlscope.overhead.correct.windows`). An update called a few times a run (SB3 PPO's ``train``:
four calls, one of them in a full window) has too few for that, and the time between operations
has no instances at all; both took the run's pooled cost per collector event, measured on other
operations. That cost moved 0-8,800 ns an event between runs of one program on an H100 and left
SB3 PPO's ``train`` +8-13% over its plain-timer truth; on PPO-GPU it took 54-77% of the unannotated
full-window time, where that time's own pieces said about half of that (the GPU wait before
``.cpu()`` absorbs part of the launches' cost, so less is due). Their pieces are many: ``train``
calls ``backward()`` 160 times, each call a boundary every window records (``engine_begin``/``end``),
and each step of a rollout leaves the same stretches between its operations.

A piece is a maximal run of the main thread's rows between two *anchor* rows: operation, phase,
category (not the backend's or the CUDA API's, recorded in full windows only), autograd engine,
session and window rows. Its *class* is its owner (the innermost operation, -1 unannotated) and the
anchors it starts and ends at; pieces of one class are alike, as an operation's instances are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import numpy as np

from rlscope import categories
from rlscope.analysis import native
from rlscope.analysis.timeline import Timeline, kinds_among
from rlscope.blocks import BLOCK_ROWS
from rlscope.keys import factorize_rows
from rlscope.trace import schema as S

ANCHOR_KINDS = (
    S.OP_BEGIN,
    S.OP_END,
    S.PHASE_BEGIN,
    S.PHASE_END,
    S.CAT_BEGIN,
    S.CAT_END,
    S.ENGINE_BEGIN,
    S.ENGINE_END,
    S.SESSION_START,
    S.SESSION_END,
    S.WINDOW,
)
# categories whose rows only full windows record: they cut no piece
FULL_ONLY_CATEGORIES = (categories.BACKEND, categories.CUDA_API)


@dataclasses.dataclass
class Pieces:
    """The main thread's pieces, in time order; the columns of those of some owners (``index``)."""

    n_rows: int  # the timeline's rows
    main: slice  # the main thread's rows (one block: the timeline's rows are grouped by thread)
    bounds: np.ndarray  # per piece, where its rows begin in ``main``, then ``len(main)``
    index: np.ndarray  # the pieces (ascending) the columns below are of: all, or those of some owners
    owner: np.ndarray  # per piece of ``index``: operation name id, -1 unannotated
    klass: np.ndarray  # per piece of ``index``: dense class id (owner and the anchors at both ends)
    start_ns: np.ndarray  # per piece of ``index``: start on the raw clock (where the switches were made)
    end_ns: np.ndarray

    def rows_of(self, chosen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(timeline rows, their piece) of the pieces ``chosen`` (ascending), in row order: a piece's
        rows are consecutive, so no per-row array of pieces is made."""
        chosen = np.asarray(chosen, np.int64)
        size = self.bounds[chosen + 1] - self.bounds[chosen]
        piece = np.repeat(chosen, size)
        at = np.arange(int(size.sum()), dtype=np.int64)  # each row's place in ``main``, then its row
        at += np.repeat(self.bounds[chosen] - (np.cumsum(size) - size) + self.main.start, size)
        return at, piece

    def groups(self, chosen: np.ndarray) -> Iterator[np.ndarray]:
        """``chosen`` (ascending) in runs of consecutive entries of about BLOCK_ROWS rows each (a larger
        piece alone): what is worked out per row of a piece is done a group at a time (rlscope.blocks),
        and a piece's rows are all in one group."""
        ends = np.cumsum(self.bounds[chosen + 1] - self.bounds[chosen])
        cuts = np.searchsorted(
            ends, np.arange(BLOCK_ROWS, int(ends[-1]) if len(ends) else 0, BLOCK_ROWS), "right"
        )
        edges = np.unique(np.concatenate([[0], cuts, [len(chosen)]]))
        for a, b in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
            yield chosen[a:b]

    def __len__(self) -> int:
        """The pieces."""
        return len(self.bounds) - 1

    def rows_only(self) -> Pieces:
        """These pieces without their columns (owner, class, times: left empty), their rows alone:
        what setting their rows' factors reads (windows.PieceEstimate). The columns, a few MB each,
        are not then held through the estimate's factors, the analysis's peak of memory."""
        empty = np.zeros(0, np.int64)
        return Pieces(self.n_rows, self.main, self.bounds, empty, empty, empty, empty, empty)

    @property
    def row(self) -> np.ndarray:
        """Per timeline row: its piece (-1: not on the main thread)."""
        row = np.full(self.n_rows, -1, np.int64)
        rows, piece = self.rows_of(np.arange(len(self)))
        row[rows] = piece
        return row


def _signature(tl: Timeline, rows: np.ndarray) -> np.ndarray:
    """One int per anchor row: its kind and what it names (an operation's name, a category)."""
    kind, ids = tl.kind[rows], tl.id[rows]
    what = np.zeros(len(rows), np.int64)
    named = np.isin(kind, (S.OP_BEGIN, S.OP_END, S.PHASE_BEGIN, S.PHASE_END))
    known = named & (ids >= 0) & (ids < len(tl.inst_name))
    what[known] = tl.inst_name[ids[known]]
    cat = np.isin(kind, (S.CAT_BEGIN, S.CAT_END))
    what[cat] = ids[cat]
    return kind.astype(np.int64) * (1 << 32) + what


def _piece_bounds(kind: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Where the pieces of rows of ``kind`` (the main thread's) and ``ids`` begin: the first row and
    each anchor (ANCHOR_KINDS, but for the FULL_ONLY_CATEGORIES' rows); then the row count."""
    types = (native.N, native.I8, None, native.U8, native.U8, native.N, native.I64, native.N, native.I64)
    fn = native.typed("windows_piece_starts", [ids.dtype], *types, restype=native.N)
    if fn is None or kind.dtype != np.int8:
        anchor = kinds_among(kind, ANCHOR_KINDS)
        cat_rows = np.flatnonzero(kinds_among(kind, (S.CAT_BEGIN, S.CAT_END)))
        anchor[cat_rows[np.isin(ids[cat_rows], FULL_ONLY_CATEGORIES)]] = False
        anchor[0] = True
        return np.append(np.flatnonzero(anchor), len(kind))
    # tables of every byte (a negative kind reads its entry from the end, as kinds_among's)
    anchor, category = np.zeros(256, np.uint8), np.zeros(256, np.uint8)
    anchor[np.asarray(ANCHOR_KINDS)] = 1
    category[[S.CAT_BEGIN, S.CAT_END]] = 1
    full_only = np.asarray(FULL_ONLY_CATEGORIES, np.int64)
    args = (len(kind), kind, ids, anchor, category, len(full_only), full_only)
    # room for a piece in _ROWS_PER_PIECE rows (a PPO run's main thread has one in eleven): an array
    # from the heap's pages, not one of every row's size from fresh ones (the estimate's peak of memory
    # is here); where they are more, a second pass writes them all. The room left over goes back to
    # the heap (a realloc in place, no copy): the bounds are held through the factors
    cap = len(kind) // _ROWS_PER_PIECE + 16
    out = np.empty(cap + 1, np.int64)
    m = fn(*args, cap, out)
    if m > cap:
        out = np.empty(m + 1, np.int64)
        fn(*args, m, out)
    out.resize(m + 1, refcheck=False)
    out[m] = len(kind)
    return out


_ROWS_PER_PIECE = 8  # _piece_bounds' first room: a piece in this many rows


def pieces(tl: Timeline, raw: Timeline, owners: Sequence[int] | None = None) -> Pieces:
    """Cut the main thread's rows of ``tl`` into pieces; ``raw``: the same rows before correction,
    whose clock the window switches were made on. ``owners``: the operations (-1: the unannotated
    time) whose pieces' columns are made, their classes numbered among them alone (in the same order
    as among all); None: every piece's. The window estimate asks a few, whose pieces are a quarter
    of them in a PPO run: columns of every piece were the analysis's peak of memory."""
    n = len(tl.ts)
    main = tl.main_rows()
    if main.stop == main.start:
        empty = np.zeros(0, np.int64)
        return Pieces(n, main, np.zeros(1, np.int64), empty, empty, empty, empty, empty)
    bounds = _piece_bounds(tl.kind[main], tl.id[main])
    index, owner, sig, after, start_ns, end_ns = _piece_columns(tl, raw, main, bounds, owners)
    klass = _classes(owner, sig, after)
    return Pieces(n, main, bounds, index, owner, klass, start_ns, end_ns)


def of_owners(owner: np.ndarray, keys: Sequence[int]) -> np.ndarray:
    """The pieces (ascending) whose ``owner`` is one of ``keys``: a comparison per key where they are
    few (np.isin of one key took five times as long), else np.isin."""
    if len(keys) > 8:
        return np.flatnonzero(np.isin(owner, keys))
    sel = np.zeros(len(owner), bool)
    for k in keys:
        sel |= owner == k
    return np.flatnonzero(sel)


_FIRST_SLOTS = 1 << 12  # the first hash table of _classes: room for 2,048 distinct triples


def _classes(owner: np.ndarray, sig: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Per piece, the rank of its (owner, sig, after) among the distinct ones in lexicographic order
    (``np.unique(axis=1)``'s). In C the distinct ones are found by hashing, in one pass, and only
    they (a few dozen of hundreds of thousands of pieces) are sorted. The hash table starts small
    (the distinct triples are few) and grows where they fill half of it, up to one of 2 n entries
    or more, which they never fill: one of every piece's size was megabytes of fresh pages."""
    types = (native.N, native.I64, native.I64, native.I64, native.N, native.I64, native.I64, native.I64)
    fn = native.function("windows_distinct_triples", *types, restype=native.N)
    if fn is None:
        return factorize_rows(np.stack([owner, sig, after]))[1]
    n = len(owner)
    largest = 1 << max(2 * n - 1, 1).bit_length()  # a power of two of 2n or more
    size = min(_FIRST_SLOTS, largest)
    ids, rep = np.empty(n, np.int64), np.empty(n, np.int64)
    while True:
        slot = np.full(size, -1, np.int64)
        count = fn(n, owner, sig, after, size, slot, ids, rep)
        if count >= 0:
            break
        size = min(size * 16, largest)
    rep = rep[:count]
    rank = np.empty(len(rep), np.int64)
    rank[np.lexsort((after[rep], sig[rep], owner[rep]))] = np.arange(len(rep))
    return rank[ids]


def _piece_columns(
    tl: Timeline, raw: Timeline, main: slice, bounds: np.ndarray, owners: Sequence[int] | None
) -> tuple[np.ndarray, ...]:
    """Of the pieces (``bounds`` in the ``main`` rows) whose owner is one of ``owners`` (None: all):
    (those pieces, ascending; their owner, :func:`_signature` of their first row and of the next
    piece's (-1 after the last piece: the anchor that ends it), their start and end on ``raw``'s
    clock). In C in one pass over the pieces to count them and one to write their entries (no
    column of every piece), where the op and id columns are of one type, as they are once narrowed."""
    n = len(bounds) - 1
    types = (native.N, native.I64, native.N, None, native.I8, None, native.I64, native.N, native.SEGMENTS)
    types += (native.U8, native.U8, native.N, native.I64, native.N, *[native.I64] * 6)
    fn = native.typed("windows_piece_columns", [tl.op.dtype], *types, restype=native.N)
    ok = tl.op.dtype == tl.id.dtype and tl.kind.dtype == np.int8
    ok = ok and tl.inst_name.dtype == raw.ts.dtype == np.int64
    if fn is None or not ok:
        first, last = main.start + bounds[:-1], main.start + bounds[1:] - 1
        names = np.append(tl.inst_name, -1)
        owner, sig = names[tl.op[first]], _signature(tl, first)
        after = np.r_[sig[1:], -1]
        index = np.arange(n) if owners is None else of_owners(owner, owners)
        columns = (owner, sig, after, raw.ts[first], raw.seg_end[last])
        return (index, *(c[index] for c in columns))
    named, category = np.zeros(256, np.uint8), np.zeros(256, np.uint8)
    named[[S.OP_BEGIN, S.OP_END, S.PHASE_BEGIN, S.PHASE_END]] = 1
    category[[S.CAT_BEGIN, S.CAT_END]] = 1
    keys = np.unique(np.asarray(owners if owners is not None else [], np.int64))
    n_keys = len(keys) if owners is not None else -1
    args = (tl.op, tl.kind, tl.id, tl.inst_name, len(tl.inst_name), raw.segments(), named, category)
    args += (n_keys, keys)
    m = n if owners is None else fn(n, bounds, main.start, *args, 0, *[np.zeros(0, np.int64)] * 6)
    out = tuple(np.empty(m, np.int64) for _ in range(6))
    fn(n, bounds, main.start, *args, m, *out)
    return out
