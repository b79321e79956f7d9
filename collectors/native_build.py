"""Compile a native part of rlscope once and cache it: the one place that builds C/C++ and knows the cache.

The scope recorder (``scope_native.c``), the backend-op recorder (``torch_native.cpp``), the GPU memory
tracker (``memory_native.cpp``, built through torch_native) and the CUPTI consumer (``cupti_native.c``)
are compiled on first use against what this machine has (Python's headers, torch's, CUDA's), not
shipped prebuilt: a wheel cannot know which torch or CUDA it will meet. Each library is cached under
``$RLSCOPE_CACHE_DIR/build`` (default ``~/.cache/rlscope/build``) by a key of everything that went
into it (source, toolchain, headers), so a changed input builds anew and an unchanged one never does.
``RLSCOPE_CACHE`` is read as a deprecated alias of ``RLSCOPE_CACHE_DIR``.

Several processes may build at once (a Pool's workers, DDP ranks): each compiles into its own
temporary file and renames it into place, which is atomic, so a reader never loads a half-written
library. A failure raises :class:`BuildError` with a one-line reason; each caller turns it into its
own "unavailable" error and falls back (Python recorder, another GPU backend).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

CACHE_ENV = "RLSCOPE_CACHE_DIR"
DEPRECATED_CACHE_ENV = "RLSCOPE_CACHE"


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
