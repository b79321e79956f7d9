"""Arrow schemas of the trace files, and the schema version readers check.

Every event is a point in time on one thread. Begin/end pairs (operations, phases, categories)
are written as two rows rather than one closed interval so that a process killed mid-scope
still leaves the begin on disk: the analyzer closes it at the end of the data and flags it.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pyarrow is imported when a schema is built, not at `import rlscope`
    import pyarrow as pa

SCHEMA_VERSION = 1

EVENTS_FILE = "events.arrows"
NAMES_FILE = "names.arrows"
PROCESS_PREFIX = "process-"


class EventKind(IntEnum):
    """What an event row records (the ``kind`` column)."""

    OP_BEGIN = 0
    OP_END = 1
    CAT_BEGIN = 2
    CAT_END = 3
    PHASE_BEGIN = 4
    PHASE_END = 5
    SESSION_START = 6
    SESSION_END = 7
    # the expensive collectors (backend ops, GPU tracing) were switched on or off on the main thread;
    # ``id`` holds the new mode (WINDOW_FULL or WINDOW_LIGHT). Written only at top-level scope exits,
    # so every root operation instance lies wholly inside one window (docs/overhead.md).
    WINDOW = 8
    # a call of torch's autograd engine (backward, grad) began or ended on the calling thread; ``id``
    # holds the call's number. On CUDA the engine's device threads launch the call's GPU work (every
    # backward kernel, DDP's all-reduce), where no operation is open: the analysis gives that work to
    # the operation open on this thread (collectors/autograd_calls.py, rlscope/analysis/gpu.py).
    ENGINE_BEGIN = 9
    ENGINE_END = 10
    # the writer paused (``id`` 0) or resumed (``id`` 1) the event detail at the detail schedule's
    # cut, or paused it when a stretch filled (rlscope/trace/detail.py), on the main thread: between
    # a pause and the next resume no event rows are written, only aggregates (AGGREGATES_FILE). At
    # a resume the writer closes the scopes that ended unrecorded and opens those that began
    # unrecorded (FLAG_SUMMARIZED), so the reader can join the detail stretches into one timeline
    # (rlscope/trace/glue.py).
    DETAIL = 11
    # Analysis-only kinds (never written to files): intervals recorded outside the events stream
    # (CUDA API calls from the GPU trace, torch ops from the native backend recorder) are merged into
    # the per-thread timeline as begin/end rows of these kinds (rlscope/analysis/timeline.py).
    API_BEGIN = 16
    API_END = 17
    BACKEND_BEGIN = 18
    BACKEND_END = 19
    COMPILE_BEGIN = 20  # a JAX compilation's stages on its thread (COMPILE_FILE), the xla_compile category
    COMPILE_END = 21


class CostClass(IntEnum):
    """Which calibrated begin/end cost a timeline row pays (rlscope/overhead/correct/residual.py)."""

    NONE = 0  # rows rlscope wrote itself (forced closes), and the rlscope category
    SCOPE = 1  # operations and phases
    CATEGORY = 2  # simulator and other CPU categories
    BACKEND = 3  # torch ops (backend category rows, native recorder rows)
    CUDA_API = 4  # CUDA API calls under CUPTI


# Plain ints of the kinds, for the recording hot path and numpy comparisons
OP_BEGIN, OP_END = int(EventKind.OP_BEGIN), int(EventKind.OP_END)
CAT_BEGIN, CAT_END = int(EventKind.CAT_BEGIN), int(EventKind.CAT_END)
PHASE_BEGIN, PHASE_END = int(EventKind.PHASE_BEGIN), int(EventKind.PHASE_END)
SESSION_START, SESSION_END = int(EventKind.SESSION_START), int(EventKind.SESSION_END)
WINDOW = int(EventKind.WINDOW)
ENGINE_BEGIN, ENGINE_END = int(EventKind.ENGINE_BEGIN), int(EventKind.ENGINE_END)
DETAIL = int(EventKind.DETAIL)
DETAIL_PAUSE, DETAIL_RESUME = 0, 1
# rows the writer keeps and the reader's join keeps whatever their time: the session's and the cuts'
UNCUT_KINDS = (SESSION_START, SESSION_END, DETAIL)
WINDOW_LIGHT = 0  # scopes and simulator boundaries only: operation totals come from these windows
WINDOW_FULL = 1  # every collector on: categories and GPU work come from these windows
API_BEGIN, API_END = int(EventKind.API_BEGIN), int(EventKind.API_END)
BACKEND_BEGIN, BACKEND_END = int(EventKind.BACKEND_BEGIN), int(EventKind.BACKEND_END)
COMPILE_BEGIN, COMPILE_END = int(EventKind.COMPILE_BEGIN), int(EventKind.COMPILE_END)

# the kinds written to events.arrows, and those the analysis merges in (never written)
WRITTEN_KINDS = (
    OP_BEGIN,
    OP_END,
    CAT_BEGIN,
    CAT_END,
    PHASE_BEGIN,
    PHASE_END,
    SESSION_START,
    SESSION_END,
    WINDOW,
    ENGINE_BEGIN,
    ENGINE_END,
    DETAIL,
)
MERGED_KINDS = (API_BEGIN, API_END, BACKEND_BEGIN, BACKEND_END, COMPILE_BEGIN, COMPILE_END)

KIND_NAMES = {k: EventKind(k).name.lower() for k in WRITTEN_KINDS}

# flags
FLAG_RECURSIVE = 1  # an operation opened while another of the same name was open on the thread
FLAG_FORCED_CLOSE = 2  # an end written by rlscope for a scope still open at session end
# a begin or end the writer wrote at a detail resume: the scope began or ended while only
# aggregates were kept (schema.DETAIL); its time before the resume is in the aggregates only
FLAG_SUMMARIZED = 4

# (column, arrow type name, meaning)
EVENT_COLUMNS_DOC = [
    ("ts_ns", "int64", "time.perf_counter_ns() (CLOCK_MONOTONIC on Linux)"),
    ("thread", "int64", "OS thread id (threading.get_native_id)"),
    ("kind", "int8", "event kind (see KIND_NAMES)"),
    ("id", "int64", "op/phase rows: the instance id; category rows: the category entered or left"),
    (
        "parent",
        "int64",
        "op/phase rows: enclosing instance (-1: none); category rows: enclosing category; session"
        " start, end and window rows: the reference Python loop's ps per iteration timed there"
        " (rlscope/overhead/correct/reference.py; -1: not timed)",
    ),
    ("name", "int32", "id into names.arrows (-1 for category rows)"),
    ("flags", "int8", "FLAG_RECURSIVE | FLAG_FORCED_CLOSE | FLAG_SUMMARIZED"),
]
EVENT_COLUMNS = [c for c, _, _ in EVENT_COLUMNS_DOC]
# written by sessions with the C scope methods (collectors/scope_native.c), absent from older traces
# and from sessions on the Python methods: what a scope or category boundary measured it cost on the
# job's thread, packed as pre | post << 32 (ns before and after the event's timestamp); 0: not
# measured, the calibrated cost applies (rlscope/overhead/correct/residual.py)
EVENT_COST_COLUMN = ("cost", "int64", "measured cost of the boundary: pre | post << 32 ns (0: not measured)")
# the writer's flush marks (the ``rlscope`` category on the writer's thread): the end row's cost is
# the flush's CPU time on that thread, in ns (its ``pre`` field), at most this
FLUSH_CPU_MAX = 0x7FFFFFFF


def unpack_cost(cost: Any) -> tuple[Any, Any]:
    """(pre, post) ns of packed ``cost`` values (numpy arrays or ints)."""
    return cost & 0xFFFFFFFF, cost >> 32


AGGREGATES_FILE = "aggregates.arrows"
# The whole run at low cost (rlscope/trace/aggregate.py): at every flush, per thread, window mode
# and state, the time spent since the last flush. A *time row* (category >= 0) is the exclusive
# time in (phase, operation, category); a *call row* (category -1) counts the operation's
# instances that ended, and their inclusive time. Written for the whole run, detail or not.
AGGREGATE_CALLS = -1  # the category of a call row
MODE_SUMMARY = 2  # the aggregates' mode of time outside the detail stretches (no event rows kept)
# analysis only (never written): detail-mode aggregates after the analysis's detail budget cut
# (rlscope/trace/budget.py), recorded with the collectors on but analyzed as summarized time
MODE_LEFT_OUT = 3
AGGREGATE_COLUMNS_DOC = [
    ("ts_ns", "int64", "the flush that wrote the row: it covers the time since the one before"),
    ("thread", "int64", "OS thread id"),
    ("mode", "int8", "0 light window, 1 full window (detail kept), 2 summary (no detail kept)"),
    ("phase", "int32", "id into names.arrows of the innermost phase (-1: none)"),
    ("operation", "int32", "id into names.arrows of the innermost operation (-1: none)"),
    ("category", "int8", "CPU category of a time row; -1 for a call row"),
    ("time_ns", "int64", "time rows: exclusive time in that state; call rows: inclusive time of the calls"),
    ("calls", "int64", "call rows: instances of the operation that ended; time rows: 0"),
    ("boundaries", "int64", "time rows: scope and category boundaries that ran in that time"),
    ("cost_ns", "int64", "time rows: what those boundaries measured they cost (schema.EVENT_COST_COLUMN)"),
]
AGGREGATE_COLUMNS = [c for c, _, _ in AGGREGATE_COLUMNS_DOC]

GPU_FILE = "gpu.arrows"
# GPU activity and CUDA API calls (from CUPTI), times already on the events' clock
GPU_COLUMNS_DOC = [
    ("category", "int8", "3 cuda_api (a runtime/driver call), 4 gpu_kernel, 5 gpu_memcpy, 6 gpu_memset"),
    ("start_ns", "int64", "start, on the events' clock (perf_counter_ns)"),
    ("end_ns", "int64", "end, on the events' clock"),
    ("correlation", "int64", "CUPTI correlation id linking a GPU record to the API call that launched it"),
    ("thread", "int64", "cuda_api rows: OS thread id of the caller; -1 for GPU rows"),
    ("device", "int16", "GPU index (-1 for cuda_api rows)"),
    ("stream", "int64", "CUDA stream id (-1 for cuda_api rows)"),
    (
        "name",
        "int32",
        "id into names.arrows: kernel name, copy kind ('memcpy HtoD', 'memcpy DtoH pageable': host side in"
        " pageable memory), or API function",
    ),
    ("bytes", "int64", "bytes copied or set (0 for kernels and API calls)"),
]
GPU_COLUMNS = [c for c, _, _ in GPU_COLUMNS_DOC]
# Kernel launch resources (native CUPTI consumer; 0 on copy, memset and API rows). Optional: traces
# written before them, or by the Kineto / cupti-python collectors, lack them and still load
# (rlscope/analysis/occupancy.py then says the figures need them).
GPU_KERNEL_COLUMNS_DOC = [
    ("grid_x", "int32", "grid size in blocks, x"),
    ("grid_y", "int32", "grid size in blocks, y"),
    ("grid_z", "int32", "grid size in blocks, z"),
    ("block_x", "int32", "block size in threads, x"),
    ("block_y", "int32", "block size in threads, y"),
    ("block_z", "int32", "block size in threads, z"),
    ("registers", "int32", "registers per thread"),
    ("static_smem", "int32", "static shared memory per block (bytes)"),
    ("dynamic_smem", "int32", "dynamic shared memory per block (bytes)"),
]
GPU_KERNEL_COLUMNS = [c for c, _, _ in GPU_KERNEL_COLUMNS_DOC]
# schema metadata key (on gpu.arrows and memory.arrows): JSON of the devices' limits and the host's
# CPU count, recorded at session start so occupancy and sharing figures work on any machine later
DEVICES_METADATA_KEY = "rlscope.devices"

MEMORY_FILE = "memory.arrows"
# CUDA caching allocator events (collectors/gpu_memory.py), times on the events' clock
MEMORY_ALLOC = 0  # a block handed to the program
MEMORY_FREE = 1  # the program freed it (free requested; the allocator may reuse it after its stream)
MEMORY_SEGMENT_ALLOC = 2  # the allocator reserved device memory (cudaMalloc)
MEMORY_SEGMENT_FREE = 3  # the allocator released reserved memory (cudaFree, empty_cache)
# recorded in full windows only (RLSCOPE_GPU_MEMORY=windows): what the allocator held as a recording
# window opened, at its first row's time. Every block or segment still open then is closed there
# (its free fell in the light window before, unseen) and these open again (rlscope/analysis/memory.py)
MEMORY_LIVE = 4  # a block allocated to the program as recording resumed
MEMORY_SEGMENT_LIVE = 5  # a segment reserved as recording resumed
# the allocator's own high-water marks on one device (torch.cuda.max_memory_allocated / _reserved),
# as recording started (0 before CUDA is initialized) and as it stopped: when the stop's mark is
# above the start's, the run reached it, whether or not a recording window saw it; addr -1
MEMORY_PEAK = 6  # allocated bytes
MEMORY_SEGMENT_PEAK = 7  # reserved bytes
MEMORY_COLUMNS_DOC = [
    ("ts_ns", "int64", "time of the event, on the events' clock"),
    ("thread", "int64", "OS thread id of the allocating thread; -1 unknown (analysis: the main thread)"),
    ("device", "int16", "GPU index"),
    (
        "action",
        "int8",
        "0 alloc, 1 free, 2 segment_alloc (reserve), 3 segment_free (release); recorded in windows:"
        " 4 block live, 5 segment live as a recording window opened; 6 allocated, 7 reserved"
        " high-water mark (torch's, per device) as recording started and stopped",
    ),
    ("addr", "int64", "device address of the block or segment"),
    ("bytes", "int64", "size of the block or segment"),
    ("stream", "int64", "CUDA stream the block belongs to"),
]
MEMORY_COLUMNS = [c for c, _, _ in MEMORY_COLUMNS_DOC]

BACKEND_FILE = "backend.arrows"
# torch ops from the native backend recorder (collectors/torch_native.cpp): the outermost op per thread
BACKEND_COLUMNS_DOC = [
    ("start_ns", "int64", "op start, on the events' clock (CLOCK_MONOTONIC)"),
    ("end_ns", "int64", "op end, on the events' clock"),
    ("thread", "int64", "OS thread id (gettid) of the thread that ran the op"),
    ("name", "int32", "id into names.arrows: the op's name (aten::addmm, ...)"),
]
BACKEND_COLUMNS = [c for c, _, _ in BACKEND_COLUMNS_DOC]

COLLECTIVES_FILE = "collectives.arrows"
# torch.distributed collectives from torch's flight recorder (collectors/collectives.py)
COLLECTIVES_COLUMNS_DOC = [
    ("ts_ns", "int64", "when the collective was queued, on the events' clock"),
    ("duration_ns", "int64", "GPU time between the CUDA events ProcessGroupNCCL records around it; -1: none"),
    ("thread", "int64", "OS thread id of the thread that queued it (-1: not a thread rlscope knows)"),
    ("name", "int32", "id into names.arrows: the collective ('nccl:all_reduce', ...)"),
    ("bytes", "int64", "size of its input tensors (0 where the type is not known)"),
    ("record_id", "int64", "the flight recorder's id: consecutive per process, a gap is a collective lost"),
    ("pg_id", "int64", "the process group's id"),
    ("recorder", "int8", "which of torch's recorders: 0 ProcessGroupNCCL's, 1 the generic one (gloo)"),
]
COLLECTIVES_COLUMNS = [c for c, _, _ in COLLECTIVES_COLUMNS_DOC]

STACKS_FILE = "stacks.arrows"
# Python stack samples (collectors/stacks.py): each sample's stack is written once, in FRAMES_FILE
STACKS_COLUMNS_DOC = [
    ("ts_ns", "int64", "time of the sample, on the events' clock"),
    ("thread", "int64", "OS thread id of the sampled thread"),
    ("stack", "int32", "the stack's id in frames.arrows"),
]
STACKS_COLUMNS = [c for c, _, _ in STACKS_COLUMNS_DOC]
FRAMES_FILE = "frames.arrows"
# schema metadata key of frames.arrows: JSON list of rlscope's own source folders at recording time
OWN_DIRS_METADATA_KEY = "rlscope.own_dirs"
# and of the interpreter's library folders (standard library, site directories, *.dist-info trees)
LIBRARY_DIRS_METADATA_KEY = "rlscope.library_dirs"
FRAMES_COLUMNS_DOC = [
    ("stack", "int32", "the stack's id (stacks.arrows)"),
    ("depth", "int16", "the frame's place in the stack: 0 the innermost (the line running)"),
    ("function", "int32", "id into names.arrows: the function's name"),
    ("file", "int32", "id into names.arrows: its source file"),
    ("line", "int32", "the line running in it (0: unknown)"),
]
FRAMES_COLUMNS = [c for c, _, _ in FRAMES_COLUMNS_DOC]

COMPILE_FILE = "compile.arrows"
# A program's compilations, one stream for every framework (collectors/compile_stream.py). JAX's
# (collectors/jax_compile.py): each stage of one is a row, an interval on the thread that ran it,
# recorded as the stage ended; a load from jax's persistent compilation cache is a point row besides
# its backend stage. torch.compile's (collectors/torch_compile.py): each compilation is an interval on
# the thread that compiled (a frame, a backward graph compiled at its first call, or compile work at run
# time), named by the function; torch's split of it into stages is a row per stage with the duration
# torch measured, ending where the compilation ends (torch does not say where inside it each stage
# ran), and a recompilation has a row of the same interval naming the guard that failed; neither kind
# is timeline time (COMPILE_UNTIMED). Read whole, on the process's own clock (never cut or joined by
# the reader: compilations are few, and counted over the whole run; rlscope/analysis/compilation.py)
COMPILE_TRACE = 0  # tracing the Python function to a jaxpr
COMPILE_LOWER = 1  # lowering the jaxpr to an MLIR module
COMPILE_BACKEND = 2  # XLA compiling the module to an executable (or loading it from the persistent cache)
COMPILE_CACHE_HIT = 3  # that executable came from jax's persistent compilation cache (start = end)
COMPILE_TORCH_FRAME = 4  # torch.compile compiling a frame: Dynamo tracing it, its backend compiling the graph
COMPILE_TORCH_BACKWARD = 5  # a compiled function's backward graph, compiled at its first backward call
COMPILE_TORCH_RUNTIME = 6  # compile work at run time: CUDA graph recording, autotuning
COMPILE_TORCH_DYNAMO = 7  # of a compilation (a duration): Dynamo's own time, tracing bytecode and guards
COMPILE_TORCH_AOT = 8  # of a compilation (a duration): AOT autograd tracing the joint graph
COMPILE_TORCH_INDUCTOR = 9  # of a compilation (a duration): inductor lowering, generating, compiling code
COMPILE_TORCH_AUTOTUNE = 10  # of a compilation (a duration): autotuning kernels while compiling
COMPILE_TORCH_RECOMPILE = 11  # the interval of a recompiled frame's compilation; name: the guard that failed
COMPILE_TRITON = 12  # a @triton.jit kernel compiled (or loaded from Triton's disk cache) at a launch
COMPILE_STAGES = {COMPILE_TRACE: "trace", COMPILE_LOWER: "lower", COMPILE_BACKEND: "backend_compile"}
TORCH_COMPILE_STAGES = {
    COMPILE_TORCH_DYNAMO: "dynamo",
    COMPILE_TORCH_AOT: "aot_autograd",
    COMPILE_TORCH_INDUCTOR: "inductor",
    COMPILE_TORCH_AUTOTUNE: "autotune",
    COMPILE_TORCH_RUNTIME: "runtime",
}
# rows that are no time on the timeline: points, torch's stage durations, the recompilations' reasons
COMPILE_UNTIMED = (
    COMPILE_CACHE_HIT,
    COMPILE_TORCH_DYNAMO,
    COMPILE_TORCH_AOT,
    COMPILE_TORCH_INDUCTOR,
    COMPILE_TORCH_AUTOTUNE,
    COMPILE_TORCH_RECOMPILE,
)
COMPILE_STAGE_CODES = tuple(range(COMPILE_TRACE, COMPILE_TRITON + 1))
COMPILE_COLUMNS_DOC = [
    ("start_ns", "int64", "start, on the events' clock (a JAX stage: its end less the time jax measured)"),
    ("end_ns", "int64", "end, on the events' clock"),
    ("thread", "int64", "OS thread id of the thread that compiled"),
    (
        "stage",
        "int8",
        "0 trace, 1 lower, 2 backend_compile, 3 persistent cache hit (a point); torch: 4 frame, 5 backward,"
        " 6 run time, 7-10 its stages' durations (dynamo, aot_autograd, inductor, autotune), 11 recompile;"
        " 12 a Triton kernel's JIT compilation",
    ),
    ("name", "int32", "id into names.arrows: the function or kernel compiled, a recompile's reason (-1: no)"),
]
COMPILE_COLUMNS = [c for c, _, _ in COMPILE_COLUMNS_DOC]

HLO_FILE = "hlo.arrows"
# The kernels of a JAX program's XLA executables and the jax.named_scope each belongs to
# (collectors/jax_hlo.py): one row per kernel-launching instruction of each compiled module, from its
# optimized HLO's metadata. Read whole, never cut or joined (rlscope/analysis/device_scopes.py)
HLO_COLUMNS_DOC = [
    ("module", "int32", "id into names.arrows: the HLO module (jit_update, ...)"),
    ("kernel", "int32", "id into names.arrows: the instruction's name as XLA names its GPU kernel"),
    (
        "path",
        "int32",
        "id into names.arrows: the named scopes around it, outermost first, '/'-joined (-1: none)",
    ),
    ("compiled_ns", "int64", "when the executable was built or loaded, on the events' clock"),
]
HLO_COLUMNS = [c for c, _, _ in HLO_COLUMNS_DOC]

MODULE_CALLS_FILE = "module_calls.arrows"
# The automatic operations' wrapped nn.Module calls (collectors/module_calls.py): at each flush, per
# thread and operation, the module calls made since the last flush. Read whole, never cut or joined:
# the correction prices each call (rlscope/overhead/correct/module_calls.py)
MODULE_CALLS_COLUMNS_DOC = [
    ("ts_ns", "int64", "the flush that wrote the row: it covers the calls since the one before"),
    ("thread", "int64", "OS thread id of the calling thread"),
    ("operation", "int32", "id into names.arrows: the innermost operation at the outermost call's end (-1)"),
    ("calls", "int64", "module calls (every level: submodules count) in that time"),
]
MODULE_CALLS_COLUMNS = [c for c, _, _ in MODULE_CALLS_COLUMNS_DOC]

NVML_FILE = "nvml.arrows"
# JSON written beside the streams of a Ray worker or driver (rlscope/ray.py): role, node, clock offset
RAY_META_FILE = "ray.json"
# JSON written by the session as it stops: facts known only at the run's end (torch's intra-op threads)
END_META_FILE = "end.json"
NVML_COLUMNS_DOC = [
    ("ts_ns", "int64", "sample time on the events' clock"),
    ("device", "int16", "GPU index"),
    ("util_gpu", "int8", "NVML utilization.gpu (%): share of the last sample period with any kernel running"),
    ("util_mem", "int8", "NVML utilization.memory (%)"),
    ("mem_used", "int64", "device memory used (bytes)"),
    ("sm_clock_mhz", "int32", "SM clock (MHz)"),
    ("power_mw", "int32", "power draw (mW)"),
]
NVML_COLUMNS = [c for c, _, _ in NVML_COLUMNS_DOC]


def events_schema(metadata: dict[str, str], cost: bool = False) -> pa.Schema:
    """The events schema with this process's metadata attached (schema version first); ``cost``:
    with the measured-cost column (EVENT_COST_COLUMN)."""
    import pyarrow as pa

    columns = EVENT_COLUMNS_DOC + ([EVENT_COST_COLUMN] if cost else [])
    fields = [pa.field(c, getattr(pa, t)()) for c, t, _ in columns]
    return pa.schema(fields, metadata={"rlscope.schema_version": str(SCHEMA_VERSION), **metadata})


def columns_schema(
    columns_doc: list[tuple[str, str, str]], collector: str = "", extra: dict[str, str] | None = None
) -> pa.Schema:
    """Schema of a collector's file (GPU activity, NVML samples) from its column table.

    ``collector`` names what wrote it (``native``, ``kineto``, ``cupti-python``): its per-event cost
    differs, and the overhead correction needs to know which one to subtract.
    """
    import pyarrow as pa

    fields = [pa.field(c, getattr(pa, t)()) for c, t, _ in columns_doc]
    meta = {"rlscope.schema_version": str(SCHEMA_VERSION)}
    if collector:
        meta["rlscope.collector"] = collector
    meta.update(extra or {})
    return pa.schema(fields, metadata=meta)


# names.arrows' optional third column, int8 1 for an automatic name (absent from older traces: none is);
# the reader reads such a name as the same operation as a user's scope of it (rlscope/trace/auto_names.py)
NAMES_AUTO_COLUMN = "auto"


def names_schema(auto: bool = False) -> pa.Schema:
    """names.arrows: ``id``, ``name`` and, with ``auto``, whether the name is an automatic
    operation's or phase's (rlscope/runtime/auto_ops.py; the writer always writes it)."""
    import pyarrow as pa

    fields = [pa.field("id", pa.int32()), pa.field("name", pa.string())]
    if auto:
        fields.append(pa.field(NAMES_AUTO_COLUMN, pa.int8()))
    return pa.schema(fields, metadata={"rlscope.schema_version": str(SCHEMA_VERSION)})


def read_options(fields: list[int] | None = None) -> pa.ipc.IpcReadOptions:
    """How a trace's streams are read: only ``fields`` (None: all), on the calling thread. Arrow's
    threads decoding each batch cost more CPU than they save, most on a stream of a few rows a flush
    (a 30-min SB3 run's aggregates: 1,800 batches read in 0.36 s of CPU, 0.15 s without them); the
    analysis runs in parallel across processes (its workers)."""
    import pyarrow as pa

    return pa.ipc.IpcReadOptions(included_fields=fields, use_threads=False)


def numpy_dtype(typ: pa.DataType) -> Any:
    """The numpy dtype of an Arrow column's values (object for strings).

    Not ``DataType.to_pandas_dtype()``: some pyarrow versions import pandas for it, which takes
    0.3 s of every profiled process's start where pandas is installed, and fails in the writer's
    last flush at interpreter shutdown.
    """
    import numpy as np
    import pyarrow as pa

    if pa.types.is_integer(typ):
        return np.dtype(f"{'u' if pa.types.is_unsigned_integer(typ) else 'i'}{typ.bit_width // 8}")
    if pa.types.is_floating(typ):
        return np.dtype(f"f{typ.bit_width // 8}")
    if pa.types.is_boolean(typ):
        return np.dtype(bool)
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return np.dtype(object)
    raise TypeError(f"no numpy dtype for the Arrow type {typ}")
