// rlscope's native GPU-memory recorder: the CUDA caching allocator's events without Python.
//
// Why not torch's allocator history (torch.cuda.memory._record_memory_history): recording is
// cheap, but draining it is not. Each drain (torch.cuda.memory._snapshot) builds a Python dict per
// entry on the writer thread while holding the GIL; a PPO loop makes ~50k allocator events a
// second on the GPU, and the job's own Python thread waits for that in every window, where the
// in-run windows cannot see it.
//
// Here an AllocatorTraceTracker (c10/cuda/CUDACachingAllocator.h) gets each event as the allocator
// makes it, with the allocator's per-device lock held (so: no GIL, no torch calls, nothing that
// blocks for long). It keeps the entry's own time stamp (torch's approximate clock, the TSC on
// x86: read once per event by torch already) and the calling thread's id, and appends it to one
// buffer under a mutex taken only here and by the drain. The drain swaps in a spare buffer that
// keeps its capacity (no allocation or page faults on the job's thread once warm), converts the
// stamps to CLOCK_MONOTONIC (the events' clock) from pairs of both clocks read at the start and at
// each drain, and copies the records into numpy arrays: no Python per event.
//
// Why the tracker stamps nothing itself: it runs on the job's thread for every allocator event,
// in light windows too, where no window can see it. The eager CartPole step makes ~190 events an
// iteration; a clock read, a growing buffer and its page faults per event cost the step +2.6% on
// an H100 (the part switched on and off between blocks of the same loop).
//
// torch has no way to detach a tracker: it is attached once per process and gated by a flag
// (mn_enable). Over kMaxRecords undrained events the tracker drops and counts them, never blocks.
//
// Loaded through ctypes (collectors/gpu_memory.py): plain extern "C" functions, no pybind11.

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/util/ApproximateClock.h>

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <type_traits>
#include <vector>

namespace {

namespace cca = c10::cuda::CUDACachingAllocator;

constexpr size_t kMaxRecords = size_t{1} << 24;  // undrained events kept (16M, 768 MiB), then drops

struct Rec {
  int64_t ts;  // torch's approximate clock until the drain converts it
  int64_t tid;
  int64_t addr;
  int64_t bytes;
  int64_t stream;
  int16_t device;
  int8_t action;  // rlscope's codes: 0 alloc, 1 free, 2 segment_alloc, 3 segment_free
  int8_t pad[5];
};

std::mutex g_mu;  // g_recs, g_spare
std::vector<Rec> g_recs;
std::vector<Rec> g_spare;  // the drained buffer, emptied, its capacity kept for the next swap
std::atomic<bool> g_enabled{false};
std::atomic<uint64_t> g_drops{0};
std::once_flag g_attached;

inline int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// One reading of both clocks: the approximate clock's midpoint around a CLOCK_MONOTONIC read.
struct ClockPair {
  double approx;
  int64_t mono;
};

inline ClockPair clock_pair() {
  auto a0 = c10::getApproximateTime();
  int64_t m = now_ns();
  auto a1 = c10::getApproximateTime();
  return {0.5 * (static_cast<double>(a0) + static_cast<double>(a1)), m};
}

ClockPair g_first{0.0, 0};  // read when the tracker starts; the conversion's slope runs from here

inline int64_t thread_id() {
  thread_local int64_t tid = static_cast<int64_t>(syscall(SYS_gettid));
  return tid;
}

// The stream field is a cudaStream_t in some torch versions and a c10::Stream in others.
template <typename S>
int64_t stream_id(const S& s) {
  if constexpr (std::is_pointer_v<S>) {
    return static_cast<int64_t>(reinterpret_cast<intptr_t>(s));
  } else if constexpr (requires { s.id(); }) {
    return static_cast<int64_t>(s.id());
  } else {
    return 0;
  }
}

template <typename E>
int8_t action_code(const E& te) {
  using A = std::remove_cvref_t<decltype(te.action_)>;
  switch (te.action_) {
    case A::ALLOC:
      return 0;
    case A::FREE_REQUESTED:
      return 1;
    case A::SEGMENT_ALLOC:
      return 2;
    case A::SEGMENT_FREE:
      return 3;
    default:
      return -1;  // free_completed, segment map/unmap, snapshot, oom: the analysis does not use them
  }
}

void track(const cca::TraceEntry& te) {
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  int8_t action = action_code(te);
  if (action < 0) return;
  Rec r{static_cast<int64_t>(te.time_.approx_t_), thread_id(), static_cast<int64_t>(te.addr_),
        static_cast<int64_t>(te.size_), stream_id(te.stream_), static_cast<int16_t>(te.device_), action, {}};
  std::lock_guard<std::mutex> g(g_mu);
  if (g_recs.size() >= kMaxRecords) {
    g_drops.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  g_recs.push_back(r);
}

}  // namespace

extern "C" {

int mn_abi_version() { return 2; }

// Attach the tracker (once per process) and start recording; 0 on success, -1 if torch refused.
int mn_start() {
  try {
    std::call_once(g_attached, [] {
      g_first = clock_pair();
      cca::attachAllocatorTraceTracker(track);
    });
  } catch (...) {
    return -1;
  }
  g_enabled.store(true);
  return 0;
}

void mn_enable(int on) { g_enabled.store(on != 0); }

size_t mn_pending() {
  std::lock_guard<std::mutex> g(g_mu);
  return g_recs.size();
}

uint64_t mn_drops() { return g_drops.load(); }

int64_t mn_now() { return now_ns(); }

// Move up to n records into the caller's arrays (oldest first), stamps on CLOCK_MONOTONIC;
// returns how many.
size_t mn_drain(int64_t* ts, int64_t* tid, int16_t* device, int8_t* action, int64_t* addr, int64_t* bytes,
                int64_t* stream, size_t n) {
  std::vector<Rec> recs;
  {
    std::lock_guard<std::mutex> g(g_mu);
    recs.swap(g_spare);  // empty, with the capacity of an earlier drain
    recs.swap(g_recs);   // the events; g_recs now the spare's buffer
    if (recs.size() > n) {  // more came since mn_pending: back in front for the next drain
      g_recs.insert(g_recs.begin(), recs.begin() + static_cast<std::ptrdiff_t>(n), recs.end());
      recs.resize(n);
    }
  }
  // approximate clock -> CLOCK_MONOTONIC: the slope over the whole run (the TSC's rate is
  // constant; where torch's clock is already ns it is 1), anchored at this drain's reading
  ClockPair now = clock_pair();
  double span = now.approx - g_first.approx;
  double slope = span > 0 ? static_cast<double>(now.mono - g_first.mono) / span : 1.0;
  for (size_t i = 0; i < recs.size(); ++i) {
    const Rec& r = recs[i];
    ts[i] = now.mono + static_cast<int64_t>((static_cast<double>(r.ts) - now.approx) * slope);
    tid[i] = r.tid;
    device[i] = r.device;
    action[i] = r.action;
    addr[i] = r.addr;
    bytes[i] = r.bytes;
    stream[i] = r.stream;
  }
  size_t k = recs.size();
  recs.clear();
  {
    std::lock_guard<std::mutex> g(g_mu);
    if (g_spare.capacity() < recs.capacity()) g_spare.swap(recs);  // kept for the next swap
  }
  return k;
}

}  // extern "C"
