"""Python stack samples: where each thread's Python time goes, down to functions and source lines.

A thread of rlscope's reads every other Python thread's current frame (``sys._current_frames()``)
``hz`` times a second and records, per thread, the time and the stack it found. The analysis puts
each sample in the operation and category its thread was in at that time (the timeline), so
``[unannotated]`` time and each operation's Python time are broken down by function and line
(rlscope/analysis/stacks.py).

Why this sampler: it runs inside the profiled process on the session's clock, so samples and scopes
share one timeline; it needs no ptrace permission (py-spy's, which containers and Ray workers often
lack) and no second process per profiled one; CPython keeps ``sys._current_frames`` for exactly this
use (faulthandler, debuggers). What it costs: each sample holds the GIL while it walks the stacks,
about 2 us for one thread 30 frames deep (cpu-vm; a stack seen for the first time costs its frames'
names more), so 100 Hz stalls the program for well under 0.1% of its time; it is a
:class:`~rlscope.collectors.protocol.Toggler`, on in full windows only, so the analysis measures that
cost in the run like any other collector's (docs/overhead.md). What it misses: time in C code that
released the GIL shows as the Python line that called it (which is where a user would change it).

Rows (schema.STACKS_COLUMNS_DOC): a sample is (time, thread, stack id); each stack is written once, as
its frames leaf first (schema.FRAMES_COLUMNS_DOC), function and file names interned in names.arrows.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any

from rlscope import annotate
from rlscope.trace import schema as S

MAX_DEPTH = 96  # frames kept per stack, from the leaf (an import chain runs 50-80 deep)
THREAD_PREFIX = "rlscope"  # rlscope's own threads (writer, windows, NVML, this one) are not sampled


def own_dirs() -> list[str]:
    """rlscope's own source folders: its frames (scope boundaries, automatic-operation wrappers, import
    hooks) are in every stack, and the analysis skips them to find the program's line."""
    import rlscope
    import rlscope.collectors

    return [os.path.dirname(m.__file__ or "") + os.sep for m in (rlscope, rlscope.collectors)]


def library_dirs() -> list[str]:
    """Where this interpreter's libraries live: the standard library, the site directories, and any
    folder on ``sys.path`` holding installed distributions (``*.dist-info``: ``pip install --target``
    trees, virtual environments put on ``PYTHONPATH``). A frame there is not the program's own line."""
    import site
    import sysconfig

    paths = sysconfig.get_paths()
    found = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    found.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    found.add(site.getusersitepackages() if hasattr(site, "getusersitepackages") else "")
    for entry in sys.path:
        try:
            if entry and os.path.isdir(entry) and any(n.endswith(".dist-info") for n in os.listdir(entry)):
                found.add(entry)
        except OSError:
            continue
    return sorted(os.path.join(os.path.abspath(d), "") for d in found if d)


class StackSampler:
    """Samples the process's Python threads at ``hz`` while enabled (full windows)."""

    def __init__(self, session: Any, hz: float) -> None:
        if hz <= 0:
            raise ValueError(f"stack sampling rate must be > 0 Hz, got {hz}")
        self.session = session
        self.period = 1.0 / hz
        self._stop = threading.Event()
        self._on = threading.Event()  # set while enabled: the thread sleeps on it in light windows
        self._on.set()
        self._thread: threading.Thread | None = None
        self._stacks: dict[tuple[tuple[Any, int], ...], int] = {}  # (code, line) per frame -> stack id
        self.samples: Any = None
        self.frames: Any = None

    def start(self) -> StackSampler:
        writer = self.session.writer
        self.samples = writer.add_stream(S.STACKS_FILE, S.columns_schema(S.STACKS_COLUMNS_DOC))
        dirs = {
            S.OWN_DIRS_METADATA_KEY: json.dumps(own_dirs()),
            S.LIBRARY_DIRS_METADATA_KEY: json.dumps(library_dirs()),
        }
        schema = S.columns_schema(S.FRAMES_COLUMNS_DOC, extra=dirs)
        self.frames = writer.add_stream(S.FRAMES_FILE, schema)
        self._thread = threading.Thread(target=self._run, name=f"{THREAD_PREFIX}-stacks", daemon=True)
        self._thread.start()
        return self

    def set_enabled(self, on: bool) -> None:
        """On in full windows: the windows measure what sampling costs the program."""
        if on:
            self._on.set()
        else:
            self._on.clear()

    def _run(self) -> None:
        """Sample every ``period`` while enabled; while disabled, sleep until enabled or stopped.

        Why not poll: a thread that wakes takes the GIL from the program's thread, so a disabled
        sampler waking ``hz`` times a second would cost the program where no window sees it (between
        detail stretches, most of a long run)."""
        clock, stop, on, period = self.session.clock, self._stop, self._on, self.period
        while not stop.is_set():
            if not on.is_set():
                on.wait()  # set_enabled(True) or stop() wakes it
                continue
            if stop.wait(period) or not on.is_set():
                continue
            try:
                self.sample(clock())
            except Exception:  # never break the user's job: a sample lost, sampling goes on
                continue

    def sample(self, now: int) -> None:
        """One sample of every Python thread but rlscope's own."""
        own = threading.get_ident()
        native = {t.ident: t.native_id for t in threading.enumerate() if not t.name.startswith(THREAD_PREFIX)}
        for ident, frame in sys._current_frames().items():
            tid = native.get(ident)
            if ident == own or tid is None:
                continue
            self.samples.append((now, tid, self._stack_id(frame)))

    def _stack_id(self, frame: FrameType | None) -> int:
        key = []
        while frame is not None and len(key) < MAX_DEPTH:
            key.append((frame.f_code, frame.f_lineno))
            frame = frame.f_back
        stack = tuple(key)
        sid = self._stacks.get(stack)
        if sid is None:
            sid = self._stacks[stack] = len(self._stacks)
            intern = annotate.intern
            for depth, (code, line) in enumerate(stack):
                self.frames.append((sid, depth, intern(code.co_name), intern(code.co_filename), line or 0))
        return sid

    def stop(self) -> None:
        self._stop.set()
        self._on.set()  # a thread asleep in a light window wakes to see the stop
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._thread = None

    def __repr__(self) -> str:
        return f"StackSampler({1 / self.period:g} Hz)"


def start_for(session: Any, started: Sequence[Any]) -> StackSampler | None:
    """The registry's factory (rlscope/collectors/registry.py): with ``stack_hz`` above 0."""
    hz = float(session.options.get("stack_hz", 0) or 0)
    return StackSampler(session, hz).start() if hz > 0 else None
