"""Profile a Ray job: an rlscope session in every Ray worker process, its trace shipped to the driver.

``rlscope.ray.profile(trace_dir, **options)`` starts the driver's own session and arranges that every
worker process of the job starts one too. Use it before ``ray.init`` (it adds itself to the job's
``runtime_env``), or pass ``init={...}`` to have it call ``ray.init(**init)``::

    with rlscope.ray.profile("trace", init={"num_cpus": 4}):
        ...  # actors and tasks; each worker writes its own process directory

**The hook.** Ray's ``runtime_env={"worker_process_setup_hook": ...}`` (documented under "Customizing
worker process loggers" and the ``runtime_env`` API) runs a function in *every* worker process of the job,
on every node, after the worker connects and before it runs any task or actor: exactly where a session
must start. The alternatives are worse: a ``sitecustomize`` on ``PYTHONPATH`` (what ``rlscope run``
does for plain children) reaches only workers of a raylet that inherited the variable, never remote
nodes; wrapping ``@ray.remote`` classes needs the user's code to change. The hook is given by module path
(``rlscope.ray._worker_setup``), so each node imports the installed rlscope; its settings travel in
``runtime_env["env_vars"]`` (``RLSCOPE_RAY``).

**Shipping.** A worker writes to a local temporary directory and, at each flush interval, sends the bytes
its Arrow streams grew by to a named collector actor pinned to the driver's node, which appends them to
``trace_dir/process-<pid>`` there (no shared filesystem assumed). Streams are append-only, so a worker
killed by Ray loses at most its last interval. When the driver's session ends it asks every worker to
end its session, ship the rest and say so (waiting ``finish_timeout_s``).

**Clocks.** Each worker measures its offset to the driver's clock with round trips to the collector (on
the driver's host, so on its monotonic clock) at start and end: offset = mean of
``t_collector - (t0 + t1) / 2``, uncertainty = half the shortest round trip, drift = end - start. They are
stored in the process metadata (``ray.json`` beside the streams) and the analyzer aligns the processes
with them (:func:`rlscope.trace.reader.clock_offset`).

Process roles (``ray.role``: the actor class, else the most frequent task function) and the node id
are recorded there too. Profiling never breaks the job: every hook warns once and steps aside.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rlscope.errors import RLScopeError
from rlscope.trace.schema import RAY_META_FILE as META_FILE

INSTALL_HINT = 'profiling Ray jobs needs Ray: pip install "rlscope[ray]"'
ENV = "RLSCOPE_RAY"  # JSON settings for the worker hook (runtime_env env_vars)
COLLECTOR = "rlscope-collector"
NAMESPACE = "rlscope"
CLOCK_ROUNDS = 8
CALL_TIMEOUT_S = 10.0  # a worker's call to the collector (an exiting worker must not hang)

__all__ = ["INSTALL_HINT", "RayProfile", "profile", "runtime_env"]


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RLScopeError(INSTALL_HINT) from None
    return ray


def _warn(message: str) -> None:
    from rlscope.errors import warn_once

    warn_once(message)


# -- the collector: an actor on the driver's node ----------------------------------------------------------


class Collector:
    """Appends workers' stream bytes under the driver's trace directory; the time reference for clocks."""

    def __init__(self, trace_dir: str, driver_anchor: tuple[int, int], driver_host: str) -> None:
        self.trace_dir = Path(trace_dir)
        self.anchor = driver_anchor  # the driver session's (perf ns, unix ns) anchor
        self.host = driver_host
        self.dirs: dict[str, str] = {}  # worker key -> process dir name
        self.done: set[str] = set()
        self.stopping = False

    def now(self) -> int:
        return time.perf_counter_ns()

    def same_host(self, host: str) -> bool:
        return host == self.host

    def register(self, key: str, pid: int, node: str) -> tuple[str, tuple[int, int]]:
        """The process directory this worker's files go to, and the driver's clock anchor."""
        if key not in self.dirs:
            name = f"process-{pid}"
            if name in self.dirs.values() or (self.trace_dir / name).exists():
                name = f"process-{pid}-{node[:8]}"
            self.dirs[key] = name
        return self.dirs[key], self.anchor

    def write(self, name: str, parts: list[tuple[str, int, bytes]]) -> bool:
        """Write file pieces at their offsets (-1: the whole file).

        Returns True once the job is ending: the worker then ends its session and ships the rest.
        """
        d = self.trace_dir / name
        d.mkdir(parents=True, exist_ok=True)
        for filename, offset, data in parts:
            path = d / filename
            if offset < 0:
                path.write_bytes(data)
                continue
            with open(path, "r+b" if path.exists() else "wb") as f:
                f.seek(offset)
                f.write(data)
        return self.stopping

    def finished(self, name: str) -> None:
        self.done.add(name)

    def stop(self) -> tuple[list[str], list[str]]:
        self.stopping = True
        return sorted(set(self.dirs.values())), sorted(self.done)


# -- the worker side ------------------------------------------------------------------------------------


def _worker_setup() -> None:
    """Ray's ``worker_process_setup_hook``: profile this worker process (warns and steps aside on failure)."""
    try:
        cfg = json.loads(os.environ.get(ENV, "") or "null")
        if cfg:
            _Worker(cfg).start()
    except Exception as e:
        _warn(f"Ray worker {os.getpid()} is not profiled: {e!r}")


class _Worker:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.options = dict(cfg.get("options") or {})
        self.interval = float(self.options.get("flush_interval", 1.0))
        self.local = Path(tempfile.mkdtemp(prefix="rlscope-ray-"))
        self.session: Any = None
        self.collector: Any = None
        self.name = ""  # process dir name on the driver
        self.sent: dict[str, int] = {}
        self.tasks: collections.Counter[str] = collections.Counter()
        self.meta: dict[str, Any] = {}
        self.clock_start: dict[str, float] | None = None
        self._lock = threading.Lock()
        self._finished = False
        self._stop = threading.Event()

    def start(self) -> None:
        import rlscope

        self._count_tasks()
        self.session = rlscope.profile(str(self.local), **self.options).start()
        atexit.register(self.finish)  # after the session's own: runs first (LIFO)
        threading.Thread(target=self._loop, name="rlscope-ray-ship", daemon=True).start()

    def _count_tasks(self) -> None:
        """Count the task functions this worker runs (their names are thread-local to the running task)."""
        ray = _import_ray()
        fm = ray._private.worker.global_worker.function_actor_manager
        original = fm.get_execution_info

        def get_execution_info(*args: Any, **kwargs: Any) -> Any:
            info = original(*args, **kwargs)
            with contextlib.suppress(Exception):
                self.tasks[str(info.function_name)] += 1
            return info

        fm.get_execution_info = get_execution_info

    def _role(self) -> dict[str, Any] | None:
        """Actor class (and name) or the most frequent task; None while this worker has run nothing."""
        ray = _import_ray()
        ctx = ray.get_runtime_context()
        actor_id = ctx.get_actor_id()
        out: dict[str, Any] = {"ray.node_id": ctx.get_node_id(), "ray.worker_id": ctx.get_worker_id()}
        if actor_id:
            actors = getattr(ray._private.worker.global_worker, "actors", {})
            inst = actors.get(ray.ActorID.from_hex(actor_id))
            cls = type(inst).__name__ if inst is not None else ""
            if inst is not None:
                self._finish_on_actor_exit(inst)
            out.update({"ray.actor_class": cls, "ray.actor_name": ctx.get_actor_name() or ""})
            out["ray.role"] = cls or "actor"
            return out if cls else None
        if self.tasks:
            names = [n for n, _ in self.tasks.most_common()]
            out.update({"ray.role": names[0].rsplit(".", 1)[-1], "ray.task_names": names})
            return out
        return None

    def _finish_on_actor_exit(self, inst: Any) -> None:
        """Ship the rest before an actor whose handles went out of scope exits.

        Ray calls the actor's ``__ray_shutdown__`` on a graceful exit, while the worker can still
        make calls; ``atexit`` runs too late for that (the core worker is already shutting down).
        """
        original = getattr(inst, "__ray_shutdown__", None)
        if getattr(original, "_rlscope", False):
            return

        def __ray_shutdown__() -> None:
            self.finish()
            if original is not None:
                original()

        __ray_shutdown__._rlscope = True  # type: ignore[attr-defined]
        with contextlib.suppress(Exception):
            inst.__ray_shutdown__ = __ray_shutdown__

    def _clock(self) -> dict[str, float]:
        ray = _import_ray()
        samples = []
        for _ in range(CLOCK_ROUNDS):
            t0 = time.perf_counter_ns()
            t = ray.get(self.collector.now.remote(), timeout=CALL_TIMEOUT_S)
            t1 = time.perf_counter_ns()
            samples.append((t - (t0 + t1) / 2, t1 - t0))
        offset = sum(s[0] for s in samples) / len(samples)
        return {"offset_ns": offset, "uncertainty_ns": min(s[1] for s in samples) / 2}

    def _connect(self) -> bool:
        ray = _import_ray()
        role = self._role()
        if role is None:
            return False
        if role.get("ray.actor_class") == Collector.__name__ and role.get("ray.actor_name") == COLLECTOR:
            self._finished = True  # rlscope's own actor: not part of the job
            self._stop.set()
            self.session.stop()
            shutil.rmtree(self.local, ignore_errors=True)
            return False
        self.collector = ray.get_actor(self.cfg["collector"], namespace=NAMESPACE)
        self.name, anchor = ray.get(
            self.collector.register.remote(role["ray.worker_id"], os.getpid(), role["ray.node_id"])
        )
        self.clock_start = self._clock()
        self.meta = {
            **role,
            "clock.reference": "ray driver",
            "clock.driver_anchor_ns": anchor[0],
            "clock.driver_anchor_unix_ns": anchor[1],
            "clock.offset_ns": round(self.clock_start["offset_ns"]),
            "clock.uncertainty_ns": round(self.clock_start["uncertainty_ns"]),
        }
        return True

    def _parts(self) -> list[tuple[str, int, bytes]]:
        parts = []
        d = self.session.process_dir if self.session is not None else None
        if d is None or not d.exists():
            return parts
        parts.append((META_FILE, -1, json.dumps(self.meta, sort_keys=True).encode()))  # -1: whole file
        for path in sorted(d.iterdir()):
            if not path.is_file():
                continue
            offset = self.sent.get(path.name, 0)
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
            if data:
                parts.append((path.name, offset, data))
                self.sent[path.name] = offset + len(data)
        return parts

    def _ship(self) -> bool:
        ray = _import_ray()
        return bool(ray.get(self.collector.write.remote(self.name, self._parts()), timeout=CALL_TIMEOUT_S))

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                with self._lock:
                    if self._finished:
                        return
                    if self.collector is None and not self._connect():
                        continue
                    stopping = self._ship()
                if stopping:
                    self.finish()
                    return
        except Exception as e:
            if not self._finished:
                _warn(f"Ray worker {os.getpid()}: its trace stops shipping: {e!r}")

    def finish(self) -> None:
        """End this worker's session, measure the clock again, ship the rest, tell the collector."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
            self._stop.set()
            try:
                if self.session is not None:
                    self.session.stop()
                if self.collector is None and not self._connect():
                    return  # ran nothing of the job: no trace
                end = self._clock()
                self.meta["clock.offset_end_ns"] = round(end["offset_ns"])
                self.meta["clock.uncertainty_end_ns"] = round(end["uncertainty_ns"])
                self.meta["clock.drift_ns"] = round(end["offset_ns"] - self.clock_start["offset_ns"])
                self._ship()
                ray = _import_ray()
                ray.get(self.collector.finished.remote(self.name), timeout=CALL_TIMEOUT_S)
            except Exception as e:
                _warn(f"Ray worker {os.getpid()}: the end of its trace may be lost: {e!r}")
            finally:
                shutil.rmtree(self.local, ignore_errors=True)


# -- the driver side ------------------------------------------------------------------------------------


def runtime_env(options: dict[str, Any] | None = None, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """``base`` (a user's runtime_env) with rlscope's worker hook and its settings added."""
    env = dict(base or {})
    if env.get("worker_process_setup_hook"):
        raise RLScopeError("the job already has a worker_process_setup_hook; rlscope.ray needs that hook")
    env["worker_process_setup_hook"] = "rlscope.ray._worker_setup"
    env_vars = dict(env.get("env_vars") or {})
    env_vars[ENV] = json.dumps({"options": options or {}, "collector": COLLECTOR})
    env_vars["RLSCOPE_RUN_TRACE_DIR"] = ""  # not `rlscope run`'s plain-child session as well
    env["env_vars"] = env_vars
    return env


@contextlib.contextmanager
def _forks_unprofiled() -> Any:
    """``ray.init`` forks its daemons with a ``preexec_fn`` (so Python's at-fork hooks run) and execs:
    no session may restart in those children (each would leave an empty process directory)."""
    from rlscope import annotate

    saved, annotate._active = annotate._active, None
    try:
        yield
    finally:
        annotate._active = saved


class RayProfile:
    """The driver's session plus the Ray plumbing; a context manager with ``start()``/``stop()``."""

    def __init__(self, trace_dir: str | os.PathLike[str], init: dict[str, Any] | None, options: dict) -> None:
        self.trace_dir = Path(trace_dir).resolve()
        self.init = init
        self.options = options
        self.finish_timeout_s = float(options.pop("finish_timeout_s", 15.0))
        self.session: Any = None
        self.collector: Any = None
        self._original_init: Any = None

    def start(self) -> RayProfile:
        import rlscope

        ray = _import_ray()
        self.session = rlscope.profile(self.trace_dir, **self.options).start()
        if ray.is_initialized():
            _warn("Ray was initialized before rlscope.ray.profile: only the driver is profiled")
        elif self.init is not None:
            kwargs = dict(self.init)
            kwargs["runtime_env"] = runtime_env(self.options, kwargs.get("runtime_env"))
            with _forks_unprofiled():
                ray.init(**kwargs)
            self._start_collector()
        else:  # the program calls ray.init itself: add the hook to its runtime_env then
            original = self._original_init = ray.init

            def init(*args: Any, **kwargs: Any) -> Any:
                try:
                    kwargs["runtime_env"] = runtime_env(self.options, kwargs.get("runtime_env"))
                except Exception as e:
                    _warn(f"Ray workers are not profiled: {e}")
                with _forks_unprofiled():
                    out = original(*args, **kwargs)
                ray.init = original
                self._start_collector()
                return out

            init.__wrapped__ = original  # type: ignore[attr-defined]
            ray.init = init
        atexit.register(self.stop)
        return self

    def _start_collector(self) -> None:
        try:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            ray = _import_ray()
            md = self.session.writer._events_file.schema.metadata or {}
            anchor = (int(md[b"clock_anchor_ns"]), int(md[b"clock_anchor_unix_ns"]))
            node = ray.get_runtime_context().get_node_id()
            actor = ray.remote(num_cpus=0)(Collector).options(
                name=COLLECTOR,
                namespace=NAMESPACE,
                get_if_exists=True,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            )
            self.collector = actor.remote(str(self.trace_dir), anchor, socket.gethostname())
            # the driver itself: same clock as the collector's host, offset measured like a worker's
            ray.get(self.collector.now.remote())
            self._write_driver_meta(ray, node)
        except Exception as e:
            _warn(f"Ray workers' traces will not reach {self.trace_dir}: {e!r}")
            self.collector = None

    def _write_driver_meta(self, ray: Any, node: str) -> None:
        d = self.session.process_dir
        meta = {"ray.role": "driver", "ray.node_id": node, "clock.reference": "ray driver"}
        (d / META_FILE).write_text(json.dumps(meta, sort_keys=True))

    def stop(self) -> None:
        """Ask every worker to ship the rest of its trace (waits ``finish_timeout_s``); end the driver's."""
        if self._original_init is not None:
            with contextlib.suppress(Exception):
                _import_ray().init = self._original_init
            self._original_init = None
        if self.collector is not None:
            try:
                ray = _import_ray()
                deadline = time.monotonic() + self.finish_timeout_s
                while True:
                    names, done = ray.get(self.collector.stop.remote())
                    if set(names) <= set(done) or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                missing = sorted(set(names) - set(done))
                if missing:
                    _warn(f"{len(missing)} Ray worker(s) did not finish shipping their trace: {missing}")
            except Exception as e:
                _warn(f"could not collect the Ray workers' traces: {e!r}")
            self.collector = None
        if self.session is not None:
            self.session.stop()
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)

    def __enter__(self) -> RayProfile:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def profile(
    trace_dir: str | os.PathLike[str] = "rlscope-trace", *, init: dict[str, Any] | None = None, **options: Any
) -> RayProfile:
    """Profile a Ray job: the driver and every worker process (module docstring).

    ``init``: keyword arguments for ``ray.init`` (called by ``start()``); without it, the program's own
    ``ray.init`` call later gets rlscope's hook. ``options``: those of :func:`rlscope.profile`, plus
    ``finish_timeout_s`` (how long the end waits for workers to ship their traces, default 15).
    """
    _import_ray()
    return RayProfile(trace_dir, init, options)
