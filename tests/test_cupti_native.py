"""The native CUPTI consumer's Python side on synthetic rows (no GPU): names, threads, clock, batches."""

from __future__ import annotations

import ctypes
import time

import numpy as np

import rlscope
from rlscope.collectors import cupti_native as cn
from rlscope.trace import schema as S


class FakeLib:
    """Stands in for the compiled consumer: hands out a prepared buffer of rows."""

    def __init__(self, buf: np.ndarray) -> None:
        self.buf = buf

    def rl_timestamp(self) -> int:
        return time.perf_counter_ns() + 1_000_000  # CUPTI's clock runs 1 ms ahead of ours

    def rl_flush(self, forced: int) -> int:
        return 0

    def rl_pending(self) -> int:
        return len(self.buf)

    def rl_drain(self, ptr: int, n: int) -> int:
        k = min(n, len(self.buf))
        ctypes.memmove(ptr, self.buf.ctypes.data, k * cn.ROW.itemsize)
        self.buf = self.buf[k:]
        return k

    def rl_name(self, i: int) -> bytes:
        return b"my_kernel"

    def rl_api_name(self, driver: int, cbid: int) -> bytes:
        # CUPTI's own name where it has one; "" (an id this CUPTI cannot name) keeps the number
        return b"cudaLaunchKernel_v7000" if (driver, cbid) == (0, 211) else b""

    def rl_stop(self) -> int:
        return 0


def test_rows_become_gpu_records(tmp_path):
    session = rlscope.profile(tmp_path / "t", backend=False, gpu=False).start()
    try:
        collector = cn.NativeCuptiCollector(session)
        buf = np.zeros(5, cn.ROW)
        buf["category"] = [3, 4, 5, 3, 5]
        buf["start"] = [2_000_000, 2_000_100, 2_000_200, 2_000_300, 2_000_400]
        buf["end"] = buf["start"] + 50
        buf["corr"] = [7, 7, 8, 9, 10]
        buf["name"] = [-1_000_211, 0, -102, -2_000_307, -201]  # -201: HtoD from pageable memory
        buf["bytes"] = [0, 0, 4096, 0, 64]
        buf["thread"] = [session.thread_state().ident32, 0, 0, 12345, 0]
        collector.lib = FakeLib(buf)
        collector._schema = S.columns_schema(S.GPU_COLUMNS_DOC + S.GPU_KERNEL_COLUMNS_DOC)
        collector.rows = session.writer.add_stream(S.GPU_FILE, collector._schema)
        collector._sync_clock()
        collector.flush()
    finally:
        session.stop()
    proc = rlscope.load_trace(tmp_path / "t").processes[0]
    rows = proc.gpu.to_pylist()
    assert [proc.name(r["name"]) for r in rows] == [
        "cudaLaunchKernel_v7000",
        "my_kernel",
        "memcpy DtoH",
        "cuda driver cbid 307",
        "memcpy HtoD pageable",
    ]
    assert rows[0]["thread"] == session.thread_states()[0].thread  # CUPTI's pthread id -> OS thread id
    assert rows[3]["thread"] == -2 - 12345  # a thread rlscope never saw keeps a distinct id
    assert rows[2]["bytes"] == 4096
    # timestamps moved onto perf_counter_ns: 1 ms earlier, within the offset measurement's slack
    assert abs(rows[0]["start_ns"] - (2_000_000 - 1_000_000)) < 50_000
    assert rows[1]["end_ns"] - rows[1]["start_ns"] == 50
