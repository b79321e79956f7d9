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
``runtime_env["env_vars"]`` (``RLSCOPE_RAY``). A hook the job already has still runs, right after
rlscope's (:func:`runtime_env` merges them), with its errors its own, as without rlscope.

**Under ``rlscope run``.** Ray workers are children of the raylet, not of the profiled program, so
``rlscope run``'s ``sitecustomize`` cannot follow them. When the program imports ray, ``rlscope run``'s
bootstrap (runtime/autorun.py) calls :func:`follow_run`: every ``ray.init`` of the program (an implicit
one too) then gets the same hook and collector as :class:`RayProfile`, with the run's session as the
driver's, and ``ray.shutdown`` (or the end of the program) first has the workers ship the rest of their
traces into the run's trace directory.

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
import importlib
import json
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlscope.errors import RAY_INSTALL_HINT as INSTALL_HINT
from rlscope.errors import RLScopeError
from rlscope.runtime.hooks import RUN_TRACE_DIR_ENV
from rlscope.trace.schema import RAY_META_FILE as META_FILE

ENV = "RLSCOPE_RAY"  # JSON settings for the worker hook (runtime_env env_vars)
COLLECTOR = "rlscope-collector"
HOOK = "rlscope.ray._worker_setup"  # by module path: each node imports its installed rlscope
NAMESPACE = "rlscope"
CLOCK_ROUNDS = 8
CONNECT_POLL_S = 0.05  # how often a worker not yet registered checks whether it has a role
CALL_TIMEOUT_S = 10.0  # a worker's call to the collector (an exiting worker must not hang)

__all__ = ["INSTALL_HINT", "RayProfile", "follow_run", "profile", "runtime_env"]


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
            from rlscope.trace import ownership

            ownership.add_entry(self.trace_dir, name)  # listed before made: the trace's own
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
    """Ray's ``worker_process_setup_hook``: profile this worker process (warns and steps aside on failure),
    then run the job's own hook given by module path, if any (its errors fail the worker, as without us)."""
    cfg: dict[str, Any] = {}
    try:
        cfg = json.loads(os.environ.get(ENV, "") or "{}")
        if cfg:
            _Worker(cfg).start()
    except Exception as e:
        _warn(f"Ray worker {os.getpid()} is not profiled: {e!r}")
    if cfg.get("user_hook"):
        module, _, name = str(cfg["user_hook"]).rpartition(".")
        getattr(importlib.import_module(module), name)()


def _then(user_hook: Callable[[], Any]) -> Callable[[], None]:
    """rlscope's hook, then the job's own callable hook: one callable, which Ray pickles and exports."""

    def rlscope_then_user_hook() -> None:
        _worker_setup()
        user_hook()

    return rlscope_then_user_hook


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
        """Register with the collector as soon as this worker has a role, then ship every interval.

        Registering early (polling every ``CONNECT_POLL_S``, not once per flush interval) is what lets
        the driver's stop wait for a worker whose whole life was shorter than a flush interval.
        """
        try:
            while not self._stop.wait(CONNECT_POLL_S if self.collector is None else self.interval):
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
    """``base`` (a job's runtime_env) with rlscope's worker hook and its settings added.

    Ray runs one ``worker_process_setup_hook`` per job, so a hook already there is merged, not replaced:
    given by module path, rlscope's hook calls it (``user_hook`` in the settings); a callable is wrapped
    with rlscope's hook in front (:func:`_then`). A runtime_env that already has rlscope's hook is kept.
    """
    env = dict(base or {})
    hook = env.get("worker_process_setup_hook")
    if hook == HOOK:
        return env
    cfg: dict[str, Any] = {"options": options or {}, "collector": COLLECTOR}
    if isinstance(hook, str):
        cfg["user_hook"] = hook
    env["worker_process_setup_hook"] = _then(hook) if callable(hook) else HOOK
    env_vars = dict(env.get("env_vars") or {})
    env_vars[ENV] = json.dumps(cfg)
    env_vars[RUN_TRACE_DIR_ENV] = ""  # not `rlscope run`'s plain-child session as well
    env["env_vars"] = env_vars
    return env


def _with_hook(kwargs: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """``ray.init``'s keyword arguments with rlscope's hook in the job's runtime_env.

    ``runtime_env=`` replaces a ``job_config``'s runtime_env in ``ray.init``, so that one is the base when
    no runtime_env is given. A job submitted with a hook of its own (``ray job submit``) cannot get
    another: Ray refuses to merge the two, so that job's workers are not profiled.
    """
    injected = json.loads(os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR") or "{}")
    if (injected.get("runtime_env") or {}).get("worker_process_setup_hook"):
        raise RLScopeError("the submitted Ray job has its own worker_process_setup_hook")
    base = kwargs.get("runtime_env")
    if base is None and kwargs.get("job_config") is not None:
        base = getattr(kwargs["job_config"], "runtime_env", None)
    return {**kwargs, "runtime_env": runtime_env(options, base)}


@contextlib.contextmanager
def _daemons_unprofiled() -> Any:
    """While ``ray.init`` starts Ray's daemons (the raylet, which later starts the workers, and Python ones
    such as the log monitor and the agents), none may get a session of its own: it forks them with a
    ``preexec_fn`` (so Python's at-fork hooks run, which restart a session in a child) and execs, and under
    ``rlscope run`` an exec'd Python would start one from the inherited ``RLSCOPE_RUN_TRACE_DIR``. Workers
    get theirs from the hook."""
    from rlscope import annotate

    saved, annotate._active = annotate._active, None
    run_dir = os.environ.pop(RUN_TRACE_DIR_ENV, None)
    try:
        yield
    finally:
        annotate._active = saved
        if run_dir is not None:
            os.environ[RUN_TRACE_DIR_ENV] = run_dir


class RayProfile:
    """The driver's session plus the Ray plumbing; a context manager with ``start()``/``stop()``.

    ``session``: a session already running in the driver (``rlscope run``'s), used instead of starting
    one; ``stop()`` then leaves it running.
    """

    def __init__(
        self,
        trace_dir: str | os.PathLike[str],
        init: dict[str, Any] | None,
        options: dict,
        session: Any = None,
    ) -> None:
        self.trace_dir = Path(trace_dir).resolve()
        self.init = init
        self.options = options
        self.finish_timeout_s = float(options.pop("finish_timeout_s", 15.0))
        self.session: Any = session
        self._own_session = session is None
        self.collector: Any = None
        self._original_init: Any = None

    def start(self) -> RayProfile:
        import rlscope

        ray = _import_ray()
        if self.session is None:
            self.session = rlscope.profile(self.trace_dir, **self.options).start()
        if ray.is_initialized():
            _warn("Ray was initialized before rlscope.ray.profile: only the driver is profiled")
        elif self.init is not None:
            self.init_ray(ray.init, (), dict(self.init))
        else:  # the program calls ray.init itself: add the hook to its runtime_env then
            original = self._original_init = ray.init

            def init(*args: Any, **kwargs: Any) -> Any:
                ray.init = original
                return self.init_ray(original, args, kwargs)

            init.__wrapped__ = original  # type: ignore[attr-defined]
            ray.init = init
        atexit.register(self.stop)
        return self

    def init_ray(self, ray_init: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
        """Call ``ray_init`` with rlscope's worker hook in the job's runtime_env, then start the collector.

        Without the hook (it could not be added) the job runs as given, its workers unprofiled.
        """
        try:
            kwargs = _with_hook(kwargs, self.options)
        except Exception as e:
            _warn(f"Ray workers are not profiled: {e}")
        with _daemons_unprofiled():
            out = ray_init(*args, **kwargs)
        self._start_collector()
        return out

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
        ray = _import_ray()
        if self.collector is not None and ray.is_initialized():  # else Ray is gone, and the workers with it
            try:
                now = time.monotonic()
                deadline, grace = now + self.finish_timeout_s, now + 3 * CONNECT_POLL_S
                while True:
                    names, done = ray.get(self.collector.stop.remote())
                    # a worker that ran something but has not registered yet does within the grace
                    finished = set(names) <= set(done) and time.monotonic() >= grace
                    if finished or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
                missing = sorted(set(names) - set(done))
                if missing:
                    _warn(f"{len(missing)} Ray worker(s) did not finish shipping their trace: {missing}")
            except Exception as e:
                _warn(f"could not collect the Ray workers' traces: {e!r}")
        self.collector = None
        if self.session is not None and self._own_session:
            self.session.stop()
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)

    def __enter__(self) -> RayProfile:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def follow_run(session: Any, options: dict[str, Any]) -> None:
    """``rlscope run``: the program's Ray workers are profiled too, into the run's trace (module docstring).

    Called by rlscope/runtime/autorun.py right after the program imports ray. Wraps ``ray.init`` (which Ray's
    implicit init on a first ``.remote()`` calls too) so that each Ray instance the program starts gets
    rlscope's hook and a collector, with ``session`` (the run's, in this process) as the driver's; and
    ``ray.shutdown`` so the workers ship the rest of their traces before Ray stops them. At the program's
    end the same happens from ``atexit`` before Ray's own shutdown (Ray registered that one on import,
    earlier, and atexit runs handlers last-registered first).
    """
    ray = _import_ray()
    if getattr(ray.init, "_rlscope_run", False):
        return
    original_init, original_shutdown = ray.init, ray.shutdown
    current: list[RayProfile] = []

    def collect() -> None:
        while current:
            current.pop().stop()

    def init(*args: Any, **kwargs: Any) -> Any:
        if ray.is_initialized():  # a second call (ignore_reinit_error): Ray's answer, as is
            return original_init(*args, **kwargs)
        current.clear()  # an earlier instance ended without ray.shutdown: its collector went with it
        prof = RayProfile(session.trace_dir, None, dict(options), session=session)
        current.append(prof)
        return prof.init_ray(original_init, args, kwargs)

    def shutdown(*args: Any, **kwargs: Any) -> Any:
        collect()
        return original_shutdown(*args, **kwargs)

    for wrapper, original in ((init, original_init), (shutdown, original_shutdown)):
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        wrapper.__doc__ = original.__doc__
        wrapper._rlscope_run = True  # type: ignore[attr-defined]
    ray.init, ray.shutdown = init, shutdown
    atexit.register(collect)


def profile(
    trace_dir: str | os.PathLike[str] = "rlscope-trace", *, init: dict[str, Any] | None = None, **options: Any
) -> RayProfile:
    """Profile a Ray job: the driver and every worker process (module docstring).

    ``init``: keyword arguments for ``ray.init`` (called by ``start()``); without it, the program's own
    ``ray.init`` call later gets rlscope's hook. ``options``: those of :func:`rlscope.profile`, plus
    ``finish_timeout_s`` (how long the end waits for workers to ship their traces, default 15).
    """
    ray = _import_ray()
    if getattr(ray.init, "_rlscope_run", False):  # `rlscope run` already follows this program's Ray
        return RunFollowsRay(trace_dir, init)  # type: ignore[return-value]
    return RayProfile(trace_dir, init, options)


class RunFollowsRay:
    """``rlscope.ray.profile`` in a program run under ``rlscope run``, which already follows Ray.

    Why: the run's driver session and its ``ray.init``/``ray.shutdown`` wrappers (:func:`follow_run`)
    already profile every worker into the run's trace; a second RayProfile would add rlscope's hook
    twice and start a second driver session, which one process cannot have. This one keeps the
    program's semantics (``init`` still starts Ray) and says once where the trace goes.
    """

    def __init__(self, trace_dir: str | os.PathLike[str], init: dict[str, Any] | None) -> None:
        from rlscope import annotate

        run = annotate._active
        self.trace_dir = Path(run.trace_dir) if run is not None else Path(trace_dir)
        self.asked = Path(trace_dir)
        self.init = init

    def start(self) -> RunFollowsRay:
        _warn(
            f"rlscope run already profiles this program and its Ray workers into {self.trace_dir};"
            f" rlscope.ray.profile({str(self.asked)!r}) records there too and writes no trace of its own"
        )
        ray = _import_ray()
        if self.init is not None and not ray.is_initialized():
            ray.init(**self.init)  # the run's wrapper adds the hook and the collector
        return self

    def stop(self) -> None:
        """The run collects the workers' traces at ``ray.shutdown`` or the program's end."""

    def __enter__(self) -> RunFollowsRay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
