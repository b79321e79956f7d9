"""Native code built on this machine: the build cache, and plain C libraries loaded through ctypes.

Two kinds of native code share this cache. The collectors' modules (``scope_native.c``,
``torch_native.cpp``, ``cupti_native.c``; collectors/native_build.py) compile against what this
machine has (Python's headers, torch's, CUDA's), not shipped prebuilt: a wheel cannot know which
torch or CUDA it will meet. The row loops of the trace's checks (rlscope/trace/native) and of the
analysis (rlscope/analysis/native) are plain C (no Python headers: they work on numpy's buffers),
each folder of ``*.c`` files compiled together into one library on first use (:class:`Library`).

Each library is cached under ``$RLSCOPE_CACHE_DIR/build`` (default ``~/.cache/rlscope/build``) by a
key of everything that went into it (source, toolchain, headers), so a changed input builds anew and
an unchanged one never does. ``RLSCOPE_CACHE`` is read as a deprecated alias of ``RLSCOPE_CACHE_DIR``.

Several processes may build at once (a Pool's workers, DDP ranks): each compiles into its own
temporary file and renames it into place, which is atomic, so a reader never loads a half-written
library. A failure raises :class:`BuildError` with a one-line reason; each caller turns it into its
own "unavailable" error and falls back (Python recorder, another GPU backend, numpy loops).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

CACHE_ENV = "RLSCOPE_CACHE_DIR"
DEPRECATED_CACHE_ENV = "RLSCOPE_CACHE"
# ``0`` runs the numpy loops instead of every C library's (:class:`Library`): the same figures
ENV = "RLSCOPE_NATIVE_ANALYSIS"


class BuildError(RuntimeError):
    """A native library cannot be built here; the message is one line saying why."""


def cache_root() -> Path:
    """rlscope's cache: ``$RLSCOPE_CACHE_DIR``, else ``$RLSCOPE_CACHE``, else ``~/.cache/rlscope``."""
    root = os.environ.get(CACHE_ENV) or os.environ.get(DEPRECATED_CACHE_ENV)
    return Path(root) if root else Path.home() / ".cache" / "rlscope"


def build_dir() -> Path:
    """Where compiled libraries are cached."""
    return cache_root() / "build"


def find_compiler(*names: str) -> Path | None:
    """The first of ``names`` on ``PATH``, resolved (its identity goes into the cache key), or None."""
    for name in names:
        found = shutil.which(name)
        if found:
            return Path(found).resolve()
    return None


def cache_key(*parts: bytes | str | Path) -> str:
    """A short hash of everything a library is built from. A compiler (a Path to an existing file)
    counts with its size and modification time, so an upgraded toolchain builds anew."""
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, Path) and p.is_file():
            st = p.stat()
            p = f"{p}:{st.st_size}:{st.st_mtime_ns}"
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def first_error(r: subprocess.CompletedProcess) -> str:
    """The compiler's first error line (one line, for a one-line warning)."""
    lines = (r.stderr or "").splitlines()
    errors = [ln for ln in lines if "error" in ln] or lines or [f"exit status {r.returncode}"]
    return errors[0].strip()[:200]


def build(out: Path, command: Callable[[str], Iterable[str]], what: str, timeout_s: float = 600) -> Path:
    """Return ``out``, compiling it first if it is not cached: ``command(tmp)`` is the compiler's
    command line writing to ``tmp``. ``what`` names the library in a failure's one-line message."""
    if out.exists():
        return out
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=out.name + ".", suffix=".tmp", dir=out.parent)
    except OSError as e:  # a read-only home, or a file where the cache should be
        raise BuildError(f"cannot build {what} in {out.parent}: {e}") from None
    os.close(fd)
    try:
        r = subprocess.run(list(command(tmp)), capture_output=True, text=True, timeout=timeout_s)
        if r.returncode != 0:
            raise BuildError(f"building {what} failed: {first_error(r)}")
        os.replace(tmp, out)
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(f"building {what} failed: {e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def wanted() -> bool:
    """Whether the C loops are asked for (``RLSCOPE_NATIVE_ANALYSIS=0`` says no)."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


class Library:
    """The ``*.c`` files of folder ``sources`` compiled together (cached by their content and the
    compiler) into the plain C library ``name``, loaded once per process.

    Its version function ``<name>_abi`` must return the version its Python side expects (raised
    with any change of a function's arguments), so a cached library built from other sources is
    never called with this version's arguments. Where it cannot be had (no compiler, a failed build
    or load, another version, or ``RLSCOPE_NATIVE_ANALYSIS=0``) :meth:`function` returns None and
    the caller runs its numpy loops."""

    def __init__(self, name: str, sources: Path, what: str) -> None:
        self.name, self.sources, self.what = name, sources, what
        self._lib: Any = None
        self._failed: str | None = None  # why there is no library (asked once per process)
        self._functions: dict[str, Callable[..., Any]] = {}

    def build(self) -> Path:
        """Compile (once, cached) and return the library's path; :class:`BuildError` when it cannot
        be built here."""
        cc = find_compiler("cc", "gcc")
        if cc is None:
            raise BuildError("no C compiler (cc)")
        sources = sorted(self.sources.glob("*.c"))
        headers = sorted(self.sources.glob("*.h"))  # included by the sources: part of what is built
        key = cache_key(*(p.read_bytes() for p in [*sources, *headers]), cc)
        out = build_dir() / f"{self.name}-{key}.so"

        def command(tmp: str) -> list[str]:
            # -ffp-contract=off: no fused multiply-adds, whose rounding differs from numpy's two steps
            flags = ["-O2", "-shared", "-fPIC", "-std=c11", "-ffp-contract=off", "-fno-fast-math"]
            return [str(cc), *flags, *map(str, sources), "-o", tmp, "-lm"]

        return build(out, command, self.what, timeout_s=120)

    def library(self, abi: int) -> Any:
        """The loaded library of version ``abi``, or None (no compiler, a failed build or load,
        another version, or not wanted)."""
        if self._lib is not None or self._failed is not None:
            return self._lib
        if not wanted():
            return None
        try:
            lib = ctypes.CDLL(str(self.build()))
            version = getattr(lib, f"{self.name}_abi")
            version.restype = ctypes.c_int64
            if version() != abi:
                raise OSError(f"{self.what}: version mismatch with their Python side")
            self._lib = lib
        except (BuildError, OSError, AttributeError) as e:
            self._failed = str(e).splitlines()[0] if str(e) else type(e).__name__
        return self._lib

    def unavailable(self, abi: int) -> str | None:
        """Why the numpy loops run (None: the C ones do)."""
        if not wanted():
            return f"{ENV}=0"
        return None if self.library(abi) is not None else self._failed

    def function(self, abi: int, name: str, *argtypes: Any, restype: Any = None) -> Callable[..., Any] | None:
        """The C function ``name`` taking ``argtypes``, or None when the numpy loops run instead."""
        if not wanted():
            return None
        fn = self._functions.get(name)
        if fn is None:
            lib = self.library(abi)
            if lib is None:
                return None
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = list(argtypes), restype
            self._functions[name] = fn
        return fn

    def typed(
        self,
        abi: int,
        integer: Mapping[Any, Any],
        name: str,
        dtypes: Sequence[Any],
        *argtypes: Any,
        restype: Any = None,
    ) -> Callable[..., Any] | None:
        """The C loop ``name`` made for integer columns of ``dtypes`` (numpy dtypes): the function
        named with a suffix per column (``name_i32``, ``name_i32_i16``), an argument type None
        standing for the first column's array type (``integer``: the array type of each dtype);
        None where the numpy loops run: no C loops, or none made for those types (not in
        ``integer``, or a width the C files do not define).

        Why: a loop is written for each width a column may have rather than each column copied to one."""
        if not dtypes or any(d not in integer for d in dtypes):
            return None
        full = name + "".join(f"_i{8 * d.itemsize}" for d in dtypes)
        lib = self.library(abi) if wanted() else None
        if lib is None or not hasattr(lib, full):
            return None
        first = integer[dtypes[0]]
        return self.function(abi, full, *(first if a is None else a for a in argtypes), restype=restype)
