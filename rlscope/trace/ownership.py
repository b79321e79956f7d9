"""Which trace directories and entries are rlscope's, and who writes into one.

rlscope never deletes or overwrites what it did not write. So a trace directory carries a manifest,
``rlscope-manifest.jsonl``: a header line (format, its version, the writer) and one line per process
directory a session made there, appended *before* the directory is made, so a process killed while
it starts leaves an entry that still lists its half-made directory. Replacing a trace removes the
entries the manifest lists and nothing else: a user's file or folder in the directory, whatever its
name, stays. A non-empty directory without a manifest is not rlscope's and is never written into.

One writer per trace: ``rlscope run`` and ``rlscope demo`` hold an exclusive ``flock`` on
``rlscope.lock`` for their whole life (:func:`claim`); a session of ``rlscope.profile`` holds a
shared one (:func:`join`), so the ranks of a distributed job may write beside each other, but no run
replaces a trace a live process still writes. The processes a run starts are part of it: they carry
its token in their environment and need no lock of their own. The kernel releases a ``flock`` when
its holder dies, however it dies, so a lock file left by a dead process is stale by construction:
it is taken over, and said.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import errno
import json
import os
import re
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any

from rlscope.errors import RLScopeError
from rlscope.trace.schema import EVENTS_FILE, PROCESS_PREFIX

MANIFEST_FILE = "rlscope-manifest.jsonl"
LOCK_FILE = "rlscope.lock"
FORMAT = "rlscope-trace"
FORMAT_VERSION = 1
# the token of the run that holds a trace directory's lock; the processes it starts inherit it
TOKEN_ENV = "RLSCOPE_TRACE_TOKEN"
# a manifest entry names one process directory inside the trace directory, nothing else: a damaged
# or hand-edited manifest can never make rlscope remove anything outside it (no separators, no ..)
_ENTRY = re.compile(rf"^{re.escape(PROCESS_PREFIX)}[A-Za-z0-9_.-]+$")
# numbered directories tried next to a default trace directory that is not rlscope's, or in use
MAX_NUMBERED = 1000


@dataclasses.dataclass
class Manifest:
    """A trace directory's manifest: its header and the process directories it lists."""

    header: dict[str, Any]
    entries: list[str]
    cuts: dict[str, str] = dataclasses.field(default_factory=dict)  # entry -> why its recording stopped


def _header() -> dict[str, Any]:
    from rlscope._version import __version__

    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "writer": f"rlscope {__version__}",
        "created_unix": round(time.time(), 3),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }


def read_manifest(path: Path) -> Manifest | None:
    """The manifest of ``path``, or None when it has none.

    Lines that do not parse (a write cut short by a kill) and entries that are not a plain process
    directory name are left out: what is listed is only ever what a session could have made.
    """
    try:
        text = (path / MANIFEST_FILE).read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    except OSError:
        return Manifest({}, [])
    header: dict[str, Any] = {}
    entries: list[str] = []
    cuts: dict[str, str] = {}
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict):
            continue
        if "format" in row and not header:
            header = row
        entry = row.get("entry")
        if isinstance(entry, str) and _ENTRY.match(entry) and entry not in entries:
            entries.append(entry)
        cut = row.get("cut")
        if isinstance(cut, str) and _ENTRY.match(cut):
            cuts[cut] = str(row.get("reason", ""))
    return Manifest(header, entries, cuts)


def _strangers(path: Path) -> list[str]:
    """What ``path`` holds besides rlscope's own manifest and lock."""
    try:
        return sorted(p.name for p in path.iterdir() if p.name not in (MANIFEST_FILE, LOCK_FILE))
    except OSError:
        return []


def _looks_like_old_trace(path: Path, names: list[str]) -> bool:
    """A trace written before manifests existed: process directories with event files, nothing else."""
    return bool(names) and all(
        n.removeprefix(".").startswith(PROCESS_PREFIX) and (path / n / EVENTS_FILE).is_file() for n in names
    )


def _not_ours(path: Path, names: list[str]) -> str:
    """The one-line reason ``path`` is not written into."""
    if _looks_like_old_trace(path, names):
        return (
            f"{path} holds a trace without a manifest ({MANIFEST_FILE}; written by an older rlscope):"
            " rlscope does not replace what it cannot prove it wrote"
        )
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return (
        f"{path} is not empty ({shown}) and is not an rlscope trace (no {MANIFEST_FILE}): rlscope"
        " writes only into a new or empty directory or one of its own traces"
    )


def _start_manifest(path: Path) -> None:
    """Write a fresh manifest (header only), replacing any: written aside, then renamed into place."""
    tmp = path / f".{MANIFEST_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(_header()) + "\n")
    os.replace(tmp, path / MANIFEST_FILE)


def _ensure_manifest(path: Path) -> None:
    """Create the manifest of a new or empty directory; a concurrent session's creation is fine."""
    try:
        fd = os.open(path / MANIFEST_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(_header()) + "\n")


def add_entry(path: Path, name: str) -> None:
    """List ``name`` (a process directory of ``path``) in the manifest, before it is made.

    One ``write`` of one short line with O_APPEND: the sessions of a run append concurrently, and
    each line lands whole.
    """
    if not _ENTRY.match(name):
        raise ValueError(f"not a process directory name: {name!r}")
    line = (json.dumps({"entry": name, "pid": os.getpid(), "host": socket.gethostname()}) + "\n").encode()
    fd = os.open(path / MANIFEST_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def note_cut(path: Path, name: str, reason: str) -> None:
    """Say in the manifest of ``path`` that process directory ``name`` stopped recording early (a
    write failed), so the analysis can say the run was cut. Best effort: on a full disk this short
    append may fail too (it often fits in the manifest's last block); never raises."""
    line = json.dumps({"cut": name, "reason": reason, "at_unix": round(time.time(), 3)}) + "\n"
    with contextlib.suppress(OSError):
        fd = os.open(path / MANIFEST_FILE, os.O_WRONLY | os.O_APPEND)  # a manifest that exists only
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def new_process_dir(path: Path, pid: int) -> Path:
    """A process directory of ``path`` for a session of process ``pid``, listed in the manifest.

    ``process-<pid>``, or ``process-<pid>-2`` and so on where that exists (the process profiled into
    this directory before, or a reused pid): a session never writes into another's directory.
    """
    listed = set((read_manifest(path) or Manifest({}, [])).entries)
    for k in range(1, MAX_NUMBERED + 1):
        name = f"{PROCESS_PREFIX}{pid}" if k == 1 else f"{PROCESS_PREFIX}{pid}-{k}"
        taken = name in listed or any(
            (path / n).exists() or (path / n).is_symlink() for n in (name, f".{name}")
        )
        if not taken:
            add_entry(path, name)
            return path / name
    raise RLScopeError(f"{path}: no free process directory name for process {pid}")


def _remove(path: Path, manifest: Manifest) -> int:
    """Remove the entries ``manifest`` lists (and their half-made ``.`` twins); how many were there.

    A listed name that is now a symlink or a file is not what a session made: it stays.
    """
    removed = 0
    for name in manifest.entries:
        for n in (name, f".{name}"):
            p = path / n
            if p.is_symlink() or not p.is_dir():
                continue
            shutil.rmtree(p)
            removed += n == name
    return removed


def clear_trace_dir(path: str | Path) -> int:
    """Remove the previous trace of ``path``, what its manifest lists and nothing else, and start a
    fresh manifest; how many process directories were removed (0 for a directory without one)."""
    p = Path(path)
    manifest = read_manifest(p) if p.is_dir() else None
    if manifest is None:
        return 0
    removed = _remove(p, manifest)
    _start_manifest(p)
    return removed


# -- the lock ------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Lock:
    """An open ``rlscope.lock`` with a ``flock`` on it (shared or exclusive)."""

    path: Path
    fd: int
    exclusive: bool
    token: str = ""

    def release(self) -> None:
        """Give the lock back (an exclusive holder empties the file first: nothing stale stays)."""
        if self.fd < 0:
            return
        with contextlib.suppress(OSError):
            if self.exclusive:
                os.ftruncate(self.fd, 0)
            os.close(self.fd)
        self.fd = -1


def _holder(path: Path) -> dict[str, Any]:
    """What the lock file says of its exclusive holder ({} when empty or unreadable)."""
    try:
        data = json.loads((path / LOCK_FILE).read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _who(holder: dict[str, Any]) -> str:
    if not holder:
        return "another rlscope session"
    since = holder.get("since_unix")
    when = time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(since)) if since else ""
    return (
        f"{holder.get('what', 'rlscope')} (pid {holder.get('pid', '?')} on {holder.get('host', '?')}{when})"
    )


def _flock(path: Path, exclusive: bool) -> int | None:
    """An fd of ``path``'s lock file with the lock taken, or None when another process holds it."""
    import fcntl

    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        raise
    return fd


def _lock_exclusive(path: Path, what: str) -> tuple[Lock | None, dict[str, Any]]:
    """Take ``path``'s lock for a run; (None, holder) when a live process holds it. A lock file still
    naming a holder whose lock is gone (it died) is taken over and said."""
    stale = _holder(path)
    fd = _flock(path, exclusive=True)
    if fd is None:
        return None, _holder(path)
    token = os.urandom(8).hex()
    me = {
        "what": what,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since_unix": round(time.time(), 3),
        "token": token,
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(me).encode(), 0)
    if stale.get("pid"):
        say(f"took over a stale lock of {_who(stale)}, which is no longer running")
    lock = Lock(path, fd, True, token)
    atexit.register(lock.release)  # emptied at any normal exit; the kernel drops it at any other
    return lock, {}


def say(message: str) -> None:
    """One line on stderr about a trace directory."""
    print(f"rlscope: {message}", file=sys.stderr, flush=True)


@dataclasses.dataclass
class Claim:
    """A trace directory a run writes: where, its lock, and what happened to the trace before it."""

    path: Path
    lock: Lock
    replaced: int  # process directories of a previous trace removed
    instead_of: Path | None  # the directory asked for, when another one was used next to it


def _writable(path: Path) -> tuple[Manifest | None, str]:
    """Whether rlscope may write into ``path`` (made if new): (its manifest, None for a new or empty
    directory; "") where it may, (None, why not) where it may not."""
    if path.exists() and not path.is_dir():
        return None, f"{path} is a file, not a directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return None, f"cannot make {path}: {e.strerror or e}"
    manifest = read_manifest(path)
    strangers = _strangers(path) if manifest is None else []
    return manifest, _not_ours(path, strangers) if strangers else ""


def _claim_one(path: Path, what: str) -> tuple[Claim | None, str]:
    """Claim ``path`` as it is, or (None, why not)."""
    manifest, why = _writable(path)
    if why:
        return None, why
    try:
        lock, holder = _lock_exclusive(path, what)
    except OSError as e:
        return None, f"cannot lock {path / LOCK_FILE}: {e.strerror or e}"
    if lock is None:
        return None, f"{path} is being written by {_who(holder)}"
    replaced = _remove(path, manifest) if manifest is not None else 0
    _start_manifest(path)
    return Claim(path, lock, replaced, None), ""


def _numbered(path: Path, k: int) -> Path:
    return path.with_name(f"{path.name}-{k}")


def claim(path: str | Path, what: str, fallback: bool = False) -> Claim:
    """The trace directory a run (``what``: ``rlscope run``, ``rlscope demo``) writes, locked for its
    life, its previous trace (what its manifest lists) removed and said on stderr.

    A directory that is not rlscope's, or that a live process writes, is refused with one line
    (:class:`RLScopeError`); with ``fallback`` (the user named no directory) the first free numbered
    one next to it (``rlscope-trace-2``, ...) is used instead, and said. The lock's token goes into
    this process's environment: the processes it starts, and its own sessions, write under it.
    """
    asked = Path(path)
    got, why = _claim_one(asked, what)
    if got is None and fallback:
        for k in range(2, MAX_NUMBERED + 1):
            got, _ = _claim_one(_numbered(asked, k), what)
            if got is not None:
                got.instead_of = asked
                say(f"{why}; writing to {got.path} instead")
                break
    if got is None:
        raise RLScopeError(f"{why}; it is left as it is: choose another --trace-dir")
    if got.replaced:
        plural = "es" if got.replaced > 1 else ""
        say(f"replacing the previous trace in {got.path} ({got.replaced} process{plural})")
    os.environ[TOKEN_ENV] = got.lock.token
    return got


def join(path: str | Path) -> Lock | None:
    """Make ``path`` ready for a session of ``rlscope.profile``; the shared lock it holds until it stops.

    None where this process belongs to the run that holds the directory (its token in the
    environment). Raises :class:`RLScopeError` (one line) for a directory that is not rlscope's or
    that a run writes. Nothing is removed: sessions write beside what is there.
    """
    p = Path(path)
    manifest, why = _writable(p)
    if why:
        raise RLScopeError(f"{why}; profile into another directory")
    if manifest is None:
        _ensure_manifest(p)
    token = os.environ.get(TOKEN_ENV)
    if token and _holder(p).get("token") == token:
        return None
    try:
        fd = _flock(p, exclusive=False)
    except OSError as e:  # a file system without flock: sessions go on unlocked, as they did
        say(f"cannot lock {p / LOCK_FILE} ({e.strerror or e}); writing without a lock")
        return None
    if fd is None:
        raise RLScopeError(f"{p} is being written by {_who(_holder(p))}; profile into another directory")
    return Lock(p, fd, False)
