"""GPU activity through rlscope's own native CUPTI consumer (``cupti_native.c``).

The C file is compiled on first use (``cc``, seconds) against the CUPTI headers and library that
CUDA installs or that the ``nvidia-cuda-cupti`` wheel (a torch dependency) ships, and cached
(collectors/native_build.py: ``$RLSCOPE_CACHE_DIR/build``). CUPTI's callback copies records into
flat rows in C; the writer thread drains them with one ``memcpy`` into a numpy array. No
per-record Python on the training thread. Anything missing (no compiler, no headers, no library)
raises CuptiUnavailable and the caller falls back to another backend.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rlscope import annotate, categories
from rlscope.collectors import native_build
from rlscope.collectors.clock import clock_offset
from rlscope.collectors.cupti_gpu import CuptiUnavailable, copy_label
from rlscope.errors import warn_once
from rlscope.trace import schema as S
from rlscope.trace.writer import to_arrow

SOURCE = Path(__file__).with_name("cupti_native.c")
ROW = np.dtype(
    [
        ("start", "<i8"),
        ("end", "<i8"),
        ("corr", "<i8"),
        ("thread", "<i8"),
        ("stream", "<i8"),
        ("bytes", "<i8"),
        ("name", "<i4"),
        ("device", "<i2"),
        ("category", "i1"),
        ("pad", "i1"),
        ("grid", "<i4", (3,)),
        ("block", "<i4", (3,)),
        ("static_smem", "<i4"),
        ("dynamic_smem", "<i4"),
        ("registers", "<i4"),
        ("pad2", "<i4"),
    ]
)


def cuda_roots() -> list[Path]:
    """Where CUDA's headers and libraries may be: the toolkit first (its include dir has everything
    CUDA's headers pull in; a wheel's may lack some), then the NVIDIA wheels a CUDA build of torch
    installs (``nvidia/cu13``, ``nvidia/cuda_cupti``, ...), then ``$CUDA_HOME`` / ``$CUDA_PATH``."""
    roots = [Path("/usr/local/cuda"), *map(Path, sorted(glob.glob("/usr/local/cuda-*"), reverse=True))]
    spec = importlib.util.find_spec("nvidia")
    for base in spec.submodule_search_locations if spec and spec.submodule_search_locations else []:
        roots += [Path(p) for p in sorted(glob.glob(os.path.join(base, "*")))]
    return roots + [Path(os.environ[e]) for e in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(e)]


def _cuda_dirs() -> list[tuple[Path, Path]]:
    """(include dir, lib dir) candidates holding cupti.h and libcupti.so."""
    out = []
    for r in cuda_roots():
        for inc in (r / "include", r / "extras/CUPTI/include", r / "targets/x86_64-linux/include"):
            if (inc / "cupti.h").exists():
                for lib in (r / "lib", r / "lib64", r / "extras/CUPTI/lib64", r / "targets/x86_64-linux/lib"):
                    if glob.glob(str(lib / "libcupti.so*")):
                        out.append((inc, lib))
    return out


def build() -> Path:
    """Compile (once, cached: collectors/native_build.py) and return the shared library's path."""
    cc = native_build.find_compiler("cc", "gcc")
    if cc is None:
        raise CuptiUnavailable("no C compiler (cc) to build the native CUPTI consumer")
    dirs = _cuda_dirs()
    if not dirs:
        raise CuptiUnavailable("CUPTI headers/library not found (CUDA toolkit or nvidia-cuda-cupti wheel)")
    errors = []
    for inc, lib in dirs:  # the CUDA toolkit first; a wheel's headers can lack what cupti.h includes
        key = native_build.cache_key(SOURCE.read_bytes(), inc, lib, cc)
        out = native_build.build_dir() / f"cupti_native-{key}.so"
        libname = "cupti"
        if not (lib / "libcupti.so").exists():  # wheels ship only libcupti.so.<major>
            libname = ":" + Path(sorted(glob.glob(str(lib / "libcupti.so*")))[0]).name

        def command(tmp: str, inc: Path = inc, lib: Path = lib, libname: str = libname) -> list[str]:
            return [
                str(cc),
                "-O2",
                "-shared",
                "-fPIC",
                "-std=c11",
                "-D_GNU_SOURCE",
                f"-I{inc}",
                str(SOURCE),
                "-o",
                tmp,
                f"-L{lib}",
                f"-l{libname}",
                f"-Wl,-rpath,{lib}",
                "-lpthread",
                "-ldl",
            ]

        try:
            return native_build.build(out, command, "the native CUPTI consumer")
        except native_build.BuildError as e:
            errors.append(f"{inc}: {e}")
    raise CuptiUnavailable("building the native CUPTI consumer failed: " + " | ".join(errors))


# the activity kinds of cupti_native.c's KINDS, in its order (bit i of rl_start_kinds' mask)
KIND_ORDER = ("kernel", "memcpy", "memset", "runtime", "driver")


def kinds_mask() -> int:
    """Which CUPTI activity kinds to record: all, or ``$RLSCOPE_CUPTI_KINDS`` (comma-separated).

    The variable exists to measure what each kind costs by switching kinds off; without
    runtime *and* driver records, kernels launched through the other API lose their launching call.
    """
    wanted = os.environ.get("RLSCOPE_CUPTI_KINDS", "")
    if not wanted.strip():
        return (1 << len(KIND_ORDER)) - 1
    names = {k.strip() for k in wanted.split(",") if k.strip()}
    unknown = names - set(KIND_ORDER)
    if unknown:
        raise CuptiUnavailable(f"RLSCOPE_CUPTI_KINDS: unknown kind(s) {sorted(unknown)}; use {KIND_ORDER}")
    return sum(1 << i for i, k in enumerate(KIND_ORDER) if k in names)


class _Detached(Exception):
    """CUPTI was detached (a light window) while the writer read its clock."""


class NativeCuptiCollector:
    """Streams CUPTI activity through the native consumer into ``gpu.arrows``."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.lib: Any = None
        self._detach = 1  # detach CUPTI in light windows (RLSCOPE_CUPTI_DETACH), read at start
        self.offset = 0
        self.enabled = True
        self._names: dict[int, int] = {}

    def start(self) -> NativeCuptiCollector:
        try:
            lib = ctypes.CDLL(str(build()))
        except OSError as e:
            raise CuptiUnavailable(f"cannot load the native CUPTI consumer: {e}") from None
        lib.rl_drain.restype = ctypes.c_size_t
        lib.rl_drain.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.rl_pending.restype = ctypes.c_size_t
        lib.rl_row_size.restype = ctypes.c_size_t
        lib.rl_name.restype = ctypes.c_char_p
        lib.rl_name.argtypes = [ctypes.c_int32]
        lib.rl_num_names.restype = ctypes.c_int32
        lib.rl_timestamp.restype = ctypes.c_uint64
        lib.rl_error.restype = ctypes.c_char_p
        if lib.rl_row_size() != ROW.itemsize:
            raise CuptiUnavailable("native CUPTI consumer: row layout mismatch")
        lib.rl_start_kinds.argtypes = [ctypes.c_uint]
        lib.rl_set_enabled.argtypes = [ctypes.c_int]
        lib.rl_set_detach.argtypes = [ctypes.c_int]
        lib.rl_detach_now.restype = ctypes.c_int
        lib.rl_set_skip_queries.argtypes = [ctypes.c_int]
        lib.rl_api_name.restype = ctypes.c_char_p
        lib.rl_api_name.argtypes = [ctypes.c_int, ctypes.c_uint32]
        # API records of pure queries (cudaGetDevice, cudaGetLastError, ...) are skipped: they launch
        # nothing and cost more to record than to run (cupti_native.c, QUERY_APIS)
        lib.rl_set_skip_queries(0 if os.environ.get("RLSCOPE_CUPTI_QUERIES") == "1" else 1)
        # detach CUPTI in light windows (cuptiFinalize, see cupti_native.c): attached with its kinds
        # disabled it still costs a PPO-GPU inference call +66% on an H200 (detached: within noise);
        # RLSCOPE_CUPTI_DETACH=0 keeps it attached
        self._detach = 0 if os.environ.get("RLSCOPE_CUPTI_DETACH") == "0" else 1
        lib.rl_set_detach(self._detach)
        rc = lib.rl_start_kinds(kinds_mask())
        if rc != 0:
            raise CuptiUnavailable(f"CUPTI refused activity tracing ({lib.rl_error(rc).decode()})")
        self.lib = lib
        from rlscope.collectors.device_limits import devices_metadata

        extra = {**devices_metadata(), "rlscope.cupti_skipped_apis": str(lib.rl_skipped_apis())}
        self._schema = S.columns_schema(S.GPU_COLUMNS_DOC + S.GPU_KERNEL_COLUMNS_DOC, "native", extra)
        self.rows = self.session.writer.add_stream(S.GPU_FILE, self._schema)
        self._sync_clock()
        self.session.writer.before_flush(self.flush)
        return self

    def _sync_clock(self) -> None:
        """offset = CUPTI clock - perf_counter_ns (re-measured at every flush: the clocks drift apart).

        Kept as it was when CUPTI is detached meanwhile (a light window began on the main thread):
        the C side then reads no clock, since reading it would attach CUPTI again."""

        def read() -> int:
            t = self.lib.rl_timestamp()
            if t == 0:
                raise _Detached
            return t

        with contextlib.suppress(_Detached):
            self.offset = clock_offset(read)

    def _name_ids(self, raw: np.ndarray) -> np.ndarray:
        """Map the consumer's name codes to rlscope's interned name ids (few distinct values)."""
        uniq, inv = np.unique(raw, return_inverse=True)
        mapped = np.empty(len(uniq), np.int64)
        for i, code in enumerate(uniq.tolist()):
            nid = self._names.get(code)
            if nid is None:
                if code >= 0:
                    label = self.lib.rl_name(code).decode(errors="replace")
                elif code == -1:
                    label = "memset"
                elif code > -1000:  # a copy: -100 - kind; -200 - kind from or to pageable host memory
                    label = copy_label(-100 - code if code > -200 else -200 - code, code <= -200)
                else:
                    driver = -code >= 2000000
                    name = self.lib.rl_api_name(int(driver), -code % 1000000).decode(errors="replace")
                    label = name or f"cuda {'driver' if driver else 'runtime'} cbid {-code % 1000000}"
                nid = self._names[code] = annotate.intern(label)
            mapped[i] = nid
        return mapped[inv.reshape(-1)]

    def set_enabled(self, on: bool) -> None:
        """GPU tracing on or off (rlscope's alternating windows, rlscope/session.py)."""
        if self.lib is not None:
            rc = self.lib.rl_set_enabled(1 if on else 0)
            self.enabled = on
            if rc != 0:  # a light window with CUPTI still attached costs what a full one does
                # CUPTI's own wording only when attaching: any CUPTI call may attach it again
                why = self.lib.rl_error(rc).decode() if on else f"CUPTI error {rc}"
                warn_once(
                    f"CUPTI refused to {'attach' if on else 'detach'} at a window switch ({why});"
                    " light windows may carry GPU tracing's cost"
                )

    def set_enabled_off_main(self, on: bool) -> None:
        """A switch made by the session's window timer, on its own thread: CUPTI is not detached here.

        Why: detaching (cuptiFinalize) while the program's threads are inside CUDA calls is not
        safe, and the timer switches at any point of a program without open operations, where the
        main thread may be in a CUDA call. A profiled SB3 PPO on an H100 with every switch made
        this way once died of heap corruption ("corrupted double-linked list"). A light window begun
        here disables the kinds with CUPTI attached, and :meth:`finish_off_main` detaches it at the
        main thread's next scope exit (the session arranges it). Attached with its kinds disabled,
        CUPTI still intercepts every CUDA call (a PPO-GPU inference call +66% on an H200), and left
        so, every later light window of the run would carry that cost.
        """
        if self.lib is not None and not on:
            self.lib.rl_set_detach(0)  # disable the kinds, do not detach
            try:
                self.set_enabled(False)
            finally:
                self.lib.rl_set_detach(self._detach)
            return
        self.set_enabled(on)

    def finish_off_main(self) -> None:
        """On the main thread, in a light window the timer began: detach CUPTI now."""
        if self.lib is None or self.enabled or not self._detach:
            return
        rc = self.lib.rl_detach_now()
        if rc != 0:
            why = self.lib.rl_error(rc).decode()
            warn_once(f"CUPTI refused to detach ({why}); light windows may carry GPU tracing's cost")

    def flush(self) -> None:
        if self.enabled:  # reading CUPTI's clock would attach a detached CUPTI again
            self._sync_clock()
        self.lib.rl_flush(1)
        n = self.lib.rl_pending()
        if n == 0:
            return
        buf = np.empty(n, ROW)
        n = self.lib.rl_drain(buf.ctypes.data, n)
        buf = buf[:n]
        threads = {st.ident32: st.thread for st in self.session.thread_states()}
        tid = buf["thread"]
        is_api = buf["category"] == categories.CUDA_API
        thread = np.where(is_api, -2 - tid, -1)
        for ident32, native in threads.items():
            thread[is_api & (tid == ident32)] = native
        cols = [
            buf["category"],
            buf["start"] - self.offset,
            buf["end"] - self.offset,
            buf["corr"],
            thread,
            buf["device"],
            buf["stream"],
            self._name_ids(buf["name"]),
            buf["bytes"],
            *(buf["grid"][:, i] for i in range(3)),
            *(buf["block"][:, i] for i in range(3)),
            buf["registers"],
            buf["static_smem"],
            buf["dynamic_smem"],
        ]
        # one record batch, columns straight from numpy: no per-record Python anywhere
        arrays = [to_arrow(c, f.type) for c, f in zip(cols, self._schema, strict=True)]
        self.rows.append(pa.RecordBatch.from_arrays(arrays, schema=self._schema))

    def stop(self) -> None:
        if self.lib is not None:
            self.lib.rl_stop()  # detaches CUPTI (cupti_native.c): the rest of the program runs untraced
            self.enabled = False  # so the last flush keeps the clock offset: reading CUPTI's would attach it
            self.flush()

    def __repr__(self) -> str:
        return "NativeCuptiCollector"


if __name__ == "__main__":  # python -m rlscope.collectors.cupti_native: build and report
    try:
        print(build())
    except CuptiUnavailable as e:
        print(f"unavailable: {e}", file=sys.stderr)
        sys.exit(1)
