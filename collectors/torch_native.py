"""The ``backend`` CPU category through rlscope's native recorder (``torch_native.cpp``).

A C++ ``at::RecordFunction`` global callback records the outermost torch op of every thread into
per-thread lock-free queues; the writer thread drains them into ``backend.arrows`` with one copy
into numpy arrays per flush. No Python runs per torch op, so a recorded op costs a fraction of
the Python ``TorchFunctionMode``'s 2-4 µs (benchmarks/backend_overhead.py).

The C++ file is compiled on first use with ``g++`` against the installed torch's headers and
libraries (about 6 s) and cached (collectors/native_build.py: ``$RLSCOPE_CACHE_DIR/build``),
keyed by the source, the torch build and the compiler. Anything missing (no compiler, a failed
build, a library that does not load) raises :class:`NativeBackendUnavailable` with a one-line
reason, and rlscope.collectors.torch_ops falls back to the Python mode.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from rlscope import annotate
from rlscope.collectors import native_build
from rlscope.runtime import autograd_engine
from rlscope.trace import schema as S

SOURCE = Path(__file__).with_name("torch_native.cpp")
ABI_VERSION = 1
BUILD_TIMEOUT_S = 600

_lib: Any = None  # the loaded library (one per process; the callback is process-wide)
_pylib: Any = None  # the same library through PyDLL: calls that keep the GIL (tn_enter/tn_exit)
ENGINE_NAME = b"torch.autograd.backward"  # the record of a backward/grad call (tn_enter)


class NativeBackendUnavailable(RuntimeError):
    """The native recorder cannot be built or loaded here; the message is one line saying why."""


def _compiler() -> Path:
    cxx = native_build.find_compiler("g++", "c++")
    if cxx is None:
        raise NativeBackendUnavailable("no C++ compiler (g++) to build the native backend-op recorder")
    return cxx


def _torch_facts(torch: Any) -> tuple[Path, bool]:
    """(torch's package directory, whether it was built with the C++11 string ABI)."""
    return Path(torch.__file__).parent, bool(torch._C._GLIBCXX_USE_CXX11_ABI)


def library_path(torch: Any, source: Path | None = None, extra: tuple[str, ...] = ()) -> Path:
    """Where the library built for this source (default ``SOURCE``), torch, compiler and extra
    compiler arguments is (or would be) cached."""
    source = source or SOURCE
    torch_dir, abi = _torch_facts(torch)
    key = native_build.cache_key(
        source.read_bytes(), str(torch.__version__), torch_dir, str(abi), _compiler(), *extra
    )
    return native_build.build_dir() / f"{source.stem}-{key}.so"


def build(
    torch: Any,
    source: Path | None = None,
    extra: tuple[str, ...] = (),
    what: str = "the native backend-op recorder",
) -> Path:
    """Compile (once, cached: collectors/native_build.py) and return the shared library's path
    (``source``: another C++ file built the same way against torch, e.g. collectors/memory_native.cpp;
    ``extra``: more compiler arguments, e.g. that file's CUDA headers and c10_cuda; ``what``: the
    library's name in a failure's one-line message)."""
    source = source or SOURCE
    out = library_path(torch, source, extra)
    if out.exists():
        return out
    from torch.utils.cpp_extension import include_paths  # only when building (slow import)

    torch_dir, abi = _torch_facts(torch)
    lib_dir = torch_dir / "lib"
    cxx = _compiler()

    def command(tmp: str) -> list[str]:
        return [
            str(cxx),
            "-O2",
            "-shared",
            "-fPIC",
            "-std=c++20",
            f"-D_GLIBCXX_USE_CXX11_ABI={int(abi)}",
            *(f"-I{p}" for p in include_paths()),
            str(source),
            "-o",
            tmp,
            f"-L{lib_dir}",
            "-ltorch_cpu",
            "-lc10",
            *extra,
            f"-Wl,-rpath,{lib_dir}",
            "-lpthread",
        ]

    try:
        return native_build.build(out, command, what, timeout_s=BUILD_TIMEOUT_S)
    except native_build.BuildError as e:
        raise NativeBackendUnavailable(str(e)) from None


def load(torch: Any) -> Any:
    """Build if needed, load, and declare the C functions (once per process)."""
    global _lib, _pylib
    if _lib is not None:
        return _lib
    path = build(torch)
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        raise NativeBackendUnavailable(f"cannot load the native backend-op recorder: {e}") from None
    i64p = ctypes.POINTER(ctypes.c_int64)
    lib.tn_drain.restype = ctypes.c_size_t
    lib.tn_drain.argtypes = [i64p, i64p, i64p, ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t]
    lib.tn_pending.restype = ctypes.c_size_t
    lib.tn_drops.restype = ctypes.c_uint64
    lib.tn_num_names.restype = ctypes.c_int32
    lib.tn_name.restype = ctypes.c_char_p
    lib.tn_name.argtypes = [ctypes.c_int32]
    lib.tn_now.restype = ctypes.c_int64
    lib.tn_gettid.restype = ctypes.c_int64
    lib.tn_enable.argtypes = [ctypes.c_int]
    lib.tn_set_muting.argtypes = [ctypes.c_int]
    lib.tn_mute_state.argtypes = [ctypes.c_int32]
    lib.tn_muted_ops.restype = ctypes.c_uint64
    if lib.tn_abi_version() != ABI_VERSION:
        raise NativeBackendUnavailable("native backend-op recorder: version mismatch with its Python side")
    pylib = ctypes.PyDLL(str(path))  # two short calls per backward: not worth releasing the GIL
    pylib.tn_enter.restype = ctypes.c_int
    pylib.tn_enter.argtypes = [ctypes.c_char_p]
    pylib.tn_exit.restype = None
    _lib, _pylib = lib, pylib
    return lib


def _ptr(a: np.ndarray, ctype: Any) -> Any:
    return a.ctypes.data_as(ctypes.POINTER(ctype))


class NativeBackendCollector:
    """Records the outermost torch op of every thread into ``backend.arrows``.

    ``start()`` needs torch imported (rlscope.collectors.torch_ops calls it from torch's import
    hook); ``set_enabled(False)`` disables the callback inside torch, so ops run as unprofiled.
    """

    def __init__(self, session: Any) -> None:
        self.session = session
        self.lib: Any = None
        self.enabled = True
        self.drops = 0  # records the queues dropped during this collector's life
        self.build_s = 0.0  # seconds to build (first use only) and load the library
        self._drops0 = 0
        self._t0 = 0
        self._map = np.zeros(0, np.int32)  # native name id -> rlscope name id
        self._engine: tuple[Any, Any, Any] | None = None  # (torch.autograd, original, wrapper)
        # one drain at a time: the writer's periodic flush and stop()'s last one may meet, and each
        # thread's queue has a single consumer (a drain racing stop() once lost its batch)
        self._drain_lock = threading.Lock()

    def start(self) -> NativeBackendCollector:
        import torch  # already imported by the user's code: this only binds it

        t0 = time.perf_counter()
        lib = load(torch)
        self.build_s = time.perf_counter() - t0
        self._drops0 = lib.tn_drops()
        self._t0 = time.perf_counter_ns()
        if lib.tn_start() != 0:
            raise NativeBackendUnavailable("torch refused the native backend-op recorder's callback")
        try:
            self._schema = S.columns_schema(S.BACKEND_COLUMNS_DOC, collector="native")
            self.rows = self.session.writer.add_stream(S.BACKEND_FILE, self._schema)
        except BaseException:
            lib.tn_stop()  # nothing would drain the queues
            raise
        self.lib = lib
        self.session.writer.before_flush(self.flush)
        if not self.enabled:
            lib.tn_enable(0)
        self._wrap_engine(torch)
        return self

    def _wrap_engine(self, torch: Any) -> None:
        """Record each autograd backward/grad call as one op on the calling thread.

        No RecordFunction covers it: on CUDA the caller only waits while the engine's device
        threads run the nodes, which would leave that wait as python time. The engine's entry is
        wrapped while the collector runs (rlscope/runtime/autograd_engine.py). On CPU the nodes then count
        as nested ops of this record.
        """
        enter, leave, name = _pylib.tn_enter, _pylib.tn_exit, ENGINE_NAME

        def begin() -> Any:
            # off (a light window), the library would only answer 0, so it is not called: a call
            # through ctypes is the costliest part of this wrapper, and a light window's cost is
            # one the windows cannot see (they take the light state as their reference)
            return enter(name) if self.enabled else 0

        def done(counted: Any) -> None:
            if counted:
                leave()

        handle = autograd_engine.wrap(torch, "backend", begin, done)
        if handle is not None:
            self._engine = handle

    def set_enabled(self, on: bool) -> None:
        """Switch recording on or off (the session's alternating windows); cheap, any thread."""
        self.enabled = bool(on)
        if self.lib is not None:
            self.lib.tn_enable(int(self.enabled))

    def _name_ids(self, lib: Any, raw: np.ndarray) -> np.ndarray:
        """Native name ids -> rlscope's interned ids (new names fetched once each)."""
        n = lib.tn_num_names()
        if n > len(self._map):
            text = [lib.tn_name(i).decode(errors="replace") for i in range(len(self._map), n)]
            new = [annotate.intern(t) for t in text]
            self._map = np.concatenate([self._map, np.asarray(new, np.int32)])
        known = (raw >= 0) & (raw < len(self._map))
        if not known.any():
            return np.full(len(raw), -1, np.int32)
        return np.where(known, self._map[np.where(known, raw, 0)], -1).astype(np.int32)

    def flush(self) -> None:
        """Drain every thread's queue into one record batch (the writer thread, before each flush)."""
        with self._drain_lock:
            if self.lib is not None:
                self._drain(self.lib)

    def _drain(self, lib: Any) -> None:
        n = lib.tn_pending()
        if n:
            start, end, tid = (np.empty(n, np.int64) for _ in range(3))
            name = np.empty(n, np.int32)
            i64 = ctypes.c_int64
            k = lib.tn_drain(_ptr(start, i64), _ptr(end, i64), _ptr(tid, i64), _ptr(name, ctypes.c_int32), n)
            # records of ops that were running when a previous session of this process stopped
            keep = end[:k] >= self._t0
            self._append(lib, start[:k][keep], end[:k][keep], tid[:k][keep], name[:k][keep])
        self.drops = int(lib.tn_drops() - self._drops0)

    def _append(
        self, lib: Any, start: np.ndarray, end: np.ndarray, tid: np.ndarray, name: np.ndarray
    ) -> None:
        import pyarrow as pa

        if not len(start):
            return
        cols = [start, end, tid, self._name_ids(lib, name)]
        arrays = [
            pa.Array.from_buffers(f.type, len(c), [None, pa.py_buffer(np.ascontiguousarray(c))])
            for c, f in zip(cols, self._schema, strict=True)
        ]
        self.rows.append(pa.RecordBatch.from_arrays(arrays, schema=self._schema))

    def stop(self) -> None:
        with self._drain_lock:
            lib, self.lib = self.lib, None
            if lib is None:
                return
            autograd_engine.unwrap(self._engine)
            self._engine = None
            lib.tn_stop()
            self._drain(lib)
        if self.drops:
            print(
                f"rlscope: warning: the native backend-op recorder dropped {self.drops} torch op(s)"
                " (a thread's queue was full between flushes); their time shows as python",
                file=sys.stderr,
            )

    def __repr__(self) -> str:
        return "NativeBackendCollector(at::RecordFunction)"


def main() -> int:
    """``python -m rlscope.collectors.torch_native``: build (or find) the library and say where."""
    import torch

    t0 = time.perf_counter()
    try:
        path = build(torch)
    except NativeBackendUnavailable as e:
        print(f"unavailable: {e}", file=sys.stderr)
        return 1
    print(f"{path} ({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
