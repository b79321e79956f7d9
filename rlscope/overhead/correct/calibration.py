"""Calibration files: rlscope's measured cost per recorded event, keyed by machine and software stack.

``rlscope calibrate`` (overhead/calibrate/rounds.py) measures the costs and saves them here; the analyzer
(rlscope/overhead/correct/residual.py) looks up the file whose key matches the trace's metadata. A cost
measured on another machine, Python, torch, CUDA or rlscope version is not trusted: the analyzer
warns and reports uncorrected figures instead of subtracting a wrong number.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from rlscope._version import __version__, package_version
from rlscope.errors import RLScopeError

SCHEMA = "rlscope.overhead.correct.calibration/1"
KEY_FIELDS = ("host", "machine", "cpu", "gpu", "python", "torch", "cuda", "scopes", "rlscope")
# the GPU is part of the key: two machines with different GPUs (an H100's and an H200's) can share a
# host name and a CPU model, and one's calibration (memory events, traced CUDA calls) would be taken
# for the other's. Traces and calibrations without the field match each other still.
GPU_FIELD = "gpu"
NVIDIA_PROC = "/proc/driver/nvidia/gpus"


class CalibrationError(RLScopeError):
    """A calibration file that cannot be used (missing, corrupt, another schema)."""


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), else what platform says."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or ""


def gpu_model(root: str | os.PathLike[str] = NVIDIA_PROC) -> str:
    """The NVIDIA GPUs' model names ('+'-joined, sorted; '' without any), read from the driver's
    files: no CUDA context, no library, so a session can record it at start for free."""
    names = set()
    for info in sorted(Path(root).glob("*/information")):
        try:
            for line in info.read_text(errors="replace").splitlines():
                if line.startswith("Model:"):
                    names.add(line.split(":", 1)[1].strip())
        except OSError:
            continue
    return "+".join(sorted(names))


def torch_cuda_version() -> str:
    """The CUDA version torch was built for ('' for CPU builds or no torch), read without importing torch."""
    try:
        spec = find_spec("torch")
    except (ImportError, ValueError):
        return ""
    if spec is None or not spec.submodule_search_locations:
        return ""
    version_py = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        for line in version_py.read_text().splitlines():
            if line.startswith("cuda"):
                value = line.split("=", 1)[1].split("#")[0].strip().strip("'\"")
                return "" if value == "None" else value
    except OSError:
        pass
    return ""


def current_key() -> dict[str, str]:
    """This process's machine and stack, as recorded in trace metadata (rlscope.session)."""
    from rlscope.collectors import scope_native

    return {
        "host": socket.gethostname(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        GPU_FIELD: gpu_model(),
        "python": sys.version.split()[0],
        "torch": package_version("torch"),
        "cuda": torch_cuda_version(),
        "scopes": scope_native.calibration_key(),  # the native and the Python scope methods cost differently
        "rlscope": __version__,
    }


def trace_key(metadata: dict[str, str]) -> dict[str, str]:
    """The calibration key of the process that wrote a trace (fields missing in old traces are '?')."""
    key = {f: metadata.get(f, "?") for f in KEY_FIELDS if f not in ("rlscope", GPU_FIELD)}
    if GPU_FIELD in metadata:  # absent from traces written before it joined the key
        key[GPU_FIELD] = metadata[GPU_FIELD]
    key["rlscope"] = metadata.get("rlscope.version", "?")
    return key


def calibration_dir() -> Path:
    """Where calibrations live: $RLSCOPE_CALIBRATION_DIR, else $RLSCOPE_CACHE/calibration, else ~/.cache."""
    if os.environ.get("RLSCOPE_CALIBRATION_DIR"):
        return Path(os.environ["RLSCOPE_CALIBRATION_DIR"])
    cache = Path(os.environ.get("RLSCOPE_CACHE", Path.home() / ".cache" / "rlscope"))
    return cache / "calibration"


def path_for(key: dict[str, str]) -> Path:
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    return calibration_dir() / f"{key['host']}-{digest}.json"


# A machine's fastest reference loop record is trusted only if within this factor of the speed a
# calibration saw itself: a slower host regime measures ~1.7-1.9x the fast one on a shared 2-core VM;
# a record much faster than that is another machine under the same host name, or wrong
SPEED_RECORD_FACTOR = 0.4


def speed_record_path(key: dict[str, str] | None = None) -> Path:
    """A machine's speed record (host and CPU model: no stack field, Python's speed is the host's):
    this machine's, or that of the machine a calibration or trace ``key`` names."""
    machine, cpu, host = (
        (platform.machine(), cpu_model(), socket.gethostname())
        if key is None
        else (key.get("machine", "?"), key.get("cpu", "?"), key.get("host", "?"))
    )
    digest = hashlib.sha1(json.dumps([machine, cpu]).encode()).hexdigest()[:12]
    return calibration_dir() / f"speed-{host}-{digest}.json"


def read_fastest_ref(key: dict[str, str] | None = None) -> float | None:
    """A machine's record of the reference loop's fastest ns per iteration (this one's, or the one
    ``key`` names; None: none yet, or unreadable); read-only: :func:`machine_fastest_ref` updates it
    at the end of a calibration."""
    try:
        value = float(json.loads(speed_record_path(key).read_text())["fastest_ref_ns"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return value if value > 0 else None


# a round or a calibration whose reference loop ran this much slower than the machine's fastest ran
# in the host's slow regime (the VM's two speeds are 1.4-1.9x apart; within 1.3x a native cost's ns
# do not move: rlscope/overhead/calibrate/rounds.py)
SLOW_REGIME = 1.3
# the native costs re-priced when their calibration ran in the slow regime (:func:`at_machine_speed`)
REGIME_PRICED = ("backend",)
# where a trace's embedded calibration carries the machine's speed record as the session started
MACHINE_FASTEST = "machine_fastest_ref_ns"


NS_FIELDS = ("total", "inside", "outside")  # an entry's figures in ns, scaled alike with its speed


def scaled_ns(row: dict[str, Any], scale: float) -> dict[str, Any]:
    """A calibration entry with its ns figures (NS_FIELDS) times ``scale``, the rest as they are."""
    return {f: v * scale if f in NS_FIELDS else v for f, v in row.items()}


def at_machine_speed(cal: dict[str, Any], fastest_ref: float | None) -> tuple[dict[str, Any], list[str]]:
    """``cal`` with each REGIME_PRICED cost measured in the host's slow regime (its ``ref_ns`` over
    SLOW_REGIME times the machine's fastest, ``fastest_ref``) scaled to that fastest speed; and one
    note per cost re-priced.

    Why: the backend recorder's cost is C++, priced in ns; within one speed regime it holds in ns
    while the reference loop wanders, but between the regimes it moves with the loop. A first
    calibration on a machine whose host ran its slow regime throughout cannot know it: in one batch
    of five beside a busy core, the first two stored 1,234 and 1,208 ns (reference loop 296 and 235
    ns) against 690-711 for the other three (153-154 ns). Once a
    later calibration records the machine's fastest speed (151 ns there), the slow ones are priced at
    it: 628 and 776 ns, within 11% of the batch's median. Within SLOW_REGIME, or with no record or
    one not trusted (SPEED_RECORD_FACTOR), nothing changes."""
    if not fastest_ref or not fastest_ref > 0:
        return cal, []
    costs, notes = dict(cal["costs_ns"]), []
    for entry in REGIME_PRICED:
        row = costs.get(entry)
        ref = float(row.get("ref_ns", 0.0) or 0.0) if isinstance(row, dict) else 0.0
        if not ref > SLOW_REGIME * fastest_ref or fastest_ref < SPEED_RECORD_FACTOR * ref:
            continue
        costs[entry] = {
            **scaled_ns(row, fastest_ref / ref),
            "ref_ns": fastest_ref,
            "regime_ref_ns": ref,
            "regime_ns": float(row.get("total", 0.0)),
        }
        notes.append(
            f"the {entry} cost was calibrated while the machine ran {ref / fastest_ref:.2f}x slower than"
            f" its fastest known speed: priced at that speed ({row.get('total', 0):.0f} ->"
            f" {costs[entry].get('total', 0):.0f} ns)"
        )
    return ({**cal, "costs_ns": costs}, notes) if notes else (cal, [])


def machine_fastest_for(cal: dict[str, Any], metadata: dict[str, str]) -> float | None:
    """The machine's fastest reference loop for a trace: the record embedded with its calibration
    as the session started, else the record the cache holds for the trace's machine."""
    try:
        embedded = float(cal.get(MACHINE_FASTEST) or 0.0)
    except (TypeError, ValueError):
        embedded = 0.0
    return embedded if embedded > 0 else read_fastest_ref(trace_key(metadata))


def machine_fastest_ref(seen_ns: float) -> tuple[float, float | None]:
    """The reference loop's fastest ns per iteration on this machine, over every calibration that
    recorded one and this one (``seen_ns``, its own fastest), and the record read (None: none, or
    not trusted); the record is updated. Why: a shared host switches between speed regimes for
    seconds or minutes; a calibration held in its slow regime throughout stored every cost of
    Python code ~1.7x too high (one run of five, in one batch of three), since its
    own fastest reference was a slow one. Stored at the machine's fastest, its costs agree."""
    path = speed_record_path()
    record = read_fastest_ref()
    if record is not None and record < SPEED_RECORD_FACTOR * seen_ns:
        record = None  # not trusted
    fastest = min(seen_ns, record) if record is not None else seen_ns
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"fastest_ref_ns": fastest}) + "\n")
        os.replace(tmp, path)
    except OSError:  # a read-only cache: the calibration's own fastest is still right for it
        pass
    return fastest, record


def save(calibration: dict[str, Any], path: str | os.PathLike[str] | None = None) -> Path:
    """Write a calibration (to the cache path of its key unless ``path`` is given)."""
    out = Path(path) if path else path_for(calibration["key"])
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(calibration, indent=1) + "\n")
    except OSError as e:
        raise CalibrationError(f"{out}: cannot write calibration: {e.strerror or e}") from None
    return out


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a calibration file; CalibrationError with a one-line reason otherwise."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise CalibrationError(f"{p}: no such calibration file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CalibrationError(f"{p}: unreadable calibration ({type(e).__name__})") from None
    data = _validated(data, str(p))
    data["path"] = str(p)
    return data


def _validated(data: Any, where: str) -> dict[str, Any]:
    """``data`` if it is a usable calibration, else CalibrationError saying why (``where``: its origin)."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise CalibrationError(f"{where}: not an rlscope calibration of schema {SCHEMA} (found {found!r})")
    costs, key = data.get("costs_ns"), data.get("key")
    if not isinstance(costs, dict) or not isinstance(key, dict):
        raise CalibrationError(f"{where}: calibration lacks 'costs_ns' or 'key'")
    for kind, parts in costs.items():
        if not isinstance(parts, dict) or not all(
            isinstance(v, int | float) and v == v and abs(v) < 1e9 for v in parts.values()
        ):
            raise CalibrationError(f"{where}: bad cost entry {kind!r}")
    return data


def _differences(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return [f"{f} {a.get(f, '?')!r} vs {b.get(f, '?')!r}" for f in KEY_FIELDS if a.get(f) != b.get(f)]


def find(metadata: dict[str, str], explicit: str | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """(calibration, None) for the trace's machine and stack, or (None, why there is none: the
    caller says what that leaves uncorrected).

    ``explicit``: a calibration file the user named; it is used only if its key matches too.
    """
    want = trace_key(metadata)
    if explicit:
        try:
            cal = load(explicit)
        except CalibrationError as e:
            return None, str(e)
        diffs = _differences(cal["key"], want)
        if diffs:
            return None, f"calibration {explicit} is from another machine or stack ({'; '.join(diffs)})"
        return cal, None
    path = path_for(want)
    if path.exists():
        try:
            return load(path), None
        except CalibrationError as e:
            return None, f"{e} (rerun `rlscope calibrate`)"
    # none for this exact stack: say what is close, so a stale calibration is recognized as such
    others = []
    for f in sorted(calibration_dir().glob("*.json")) if calibration_dir().is_dir() else []:
        try:
            cal = load(f)
        except CalibrationError:
            continue
        if cal["key"].get("host") == want["host"]:
            others.append(_differences(cal["key"], want))
    where = f"host {want['host']}, python {want['python']}, torch {want['torch'] or 'none'}"
    if others:
        closest = min(others, key=len)
        return None, (
            f"the calibrations for this host are stale ({'; '.join(closest)}); run `rlscope calibrate`"
        )
    return None, f"no overhead calibration for {where}; run `rlscope calibrate`"


METADATA_KEY = "calibration"  # trace metadata key holding the calibration the run was profiled with
EMBEDDED = "embedded in the trace"  # a calibration's "path" when it came from the trace itself


def for_trace_metadata(metadata: dict[str, str] | None = None) -> str | None:
    """The JSON of the calibration for this machine and stack (the cache file the analyzer would look
    up), to store in the trace's metadata under ``METADATA_KEY``; None when there is none usable.

    The costs then travel with the trace: analyzed on another machine, or after a recalibration, it
    is corrected with the costs of the machine and moment it was recorded on. ``metadata``: the
    trace metadata being written (its key fields), else this process's key. Never raises: a session
    must start whatever the cache holds.
    """
    try:
        key = trace_key(metadata) if metadata is not None else current_key()
        cal = load(path_for(key))
    except (CalibrationError, OSError, ValueError):
        return None
    if _differences(cal["key"], key):
        return None
    cal["source"] = cal.pop("path")
    fastest = read_fastest_ref(key)
    if fastest is not None:  # the machine's speed as the run started, for :func:`at_machine_speed`
        cal[MACHINE_FASTEST] = fastest
    return json.dumps(cal, separators=(",", ":"), sort_keys=True)


def from_trace_metadata(metadata: dict[str, str]) -> dict[str, Any] | None:
    """The calibration a trace was recorded with (``for_trace_metadata``), or None when it has none,
    it is unreadable, or its key is not the trace's (then the cache lookup decides, as before)."""
    text = metadata.get(METADATA_KEY)
    if not text:
        return None
    try:
        cal = _validated(json.loads(text), "the trace's embedded calibration")
    except (CalibrationError, json.JSONDecodeError, TypeError):
        return None
    if _differences(cal["key"], trace_key(metadata)):
        return None
    cal["path"] = EMBEDDED
    return cal


def for_trace(
    metadata: dict[str, str], explicit: str | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """The calibration to correct a process's trace with: ``explicit`` (a file the user named) if
    given, else the one embedded in the trace, else the cache's for its machine and stack (``find``).

    The embedded one wins over the cache so that a trace gives the same figures wherever and
    whenever it is analyzed.
    """
    if not explicit:
        embedded = from_trace_metadata(metadata)
        if embedded is not None:
            return embedded, None
    return find(metadata, explicit)


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two loaded calibrations hold the same costs for the same key (wherever they came from)."""
    return a.get("key") == b.get("key") and a.get("costs_ns") == b.get("costs_ns")
