// rlscope's native backend-op recorder: the `backend` CPU category without Python on the hot path.
//
// A global at::RecordFunction callback (scope FUNCTION, no inputs, outputs or ids) sees every
// dispatcher op on every thread. Only the outermost op per thread is recorded (a thread_local
// depth counter): the time of a torch call from Python, or of one autograd node, is one interval,
// and the ops it runs inside count as part of it. Autograd nodes are FUNCTION-scope records of the
// engine ("autograd::engine::evaluate_function: MmBackward0"); the BACKWARD_FUNCTION records each
// node opens inside them are always nested, and subscribing to that scope would make every node
// build its name string for nothing (demangling, for some), so it is left out. A backward/grad
// call itself has no RecordFunction: the Python side brackets it with tn_enter/tn_exit, so the
// caller's wait for the engine is one record and the nodes it runs on this thread are nested.
//
// A torch.compile'd region is one outermost record too: Dynamo wraps the compiled frame in a
// FUNCTION-scope RecordFunction named "Torch-Compiled Region: <id>" (torch/csrc/dynamo/
// cpp_shim.cpp), so the aten calls inside the compiled graph (inductor's extern kernels, eager
// and aot_eager graphs) are nested and not recorded one by one; its backward is one autograd node
// (CompiledFunctionBackward). Dynamo's guard check is a record of its own ("TorchDynamo Cache
// Lookup").
//
// Records go into a per-thread single-producer/single-consumer queue of fixed-size chunks (the
// thread writes, the drain reads; atomics only). A thread registers its queue in the global list
// under a mutex once, on its first recorded op. A queue over its limit drops records and counts
// them: the job never blocks and never fails because of the recorder.
//
// Times: clock_gettime(CLOCK_MONOTONIC), the clock of Python's time.perf_counter_ns on Linux.
// Threads: gettid(), equal to threading.get_native_id(). Names are interned per process: a
// thread_local cache keyed by the name's address (checked against the interned text, since
// autograd node names live in temporary strings) in front of a global table under a mutex.
//
// Loaded through ctypes (collectors/torch_native.py): plain extern "C" functions, no pybind11.

#include <ATen/record_function.h>

#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace {

constexpr uint32_t kChunkRecords = 4096;  // 96 KiB per chunk
constexpr int64_t kMaxChunks = 256;       // per thread: about 1M undrained records, then drops

struct Slot {
  int64_t start;
  int64_t end;
  int32_t name;
  int32_t pad;
};

struct Chunk {
  std::atomic<uint32_t> count{0};  // records published (written by the producer only)
  std::atomic<Chunk*> next{nullptr};
  Slot slots[kChunkRecords];
};

// One thread's queue. Producer: the thread itself (tail). Consumer: tn_drain under g_drain_mu.
struct ThreadQueue {
  Chunk* tail = nullptr;  // producer side
  Chunk* head = nullptr;  // consumer side
  uint32_t head_pos = 0;  // consumer side: records of `head` already drained
  std::atomic<int64_t> chunks{1};
  std::atomic<uint64_t> drops{0};
  std::atomic<bool> finished{false};  // the thread exited: free once drained
  int64_t tid = 0;
};

struct CacheEntry {
  const char* ptr;
  const char* interned;
  int32_t id;
};

// Everything the hot path touches: one trivially constructible thread_local (no TLS init guard).
struct Tls {
  int32_t depth;
  int32_t name;
  int64_t start;
  ThreadQueue* queue;
  int32_t nested;  // ops started inside the current outermost op
  bool muted;      // the current outermost op turned RecordFunction off for this thread
  bool failed;
  CacheEntry cache[64];
};
thread_local Tls tls;

// Marks the thread's queue finished when the thread exits (constructed on registration only).
// An op run by a later thread_local destructor of the same thread is dropped rather than written
// into a queue the drain may already have freed.
struct ExitMark {
  ThreadQueue* queue = nullptr;
  ~ExitMark() {
    tls.queue = nullptr;
    tls.failed = true;
    if (queue != nullptr) queue->finished.store(true, std::memory_order_release);
  }
};
thread_local ExitMark exit_mark;

std::mutex g_queues_mu;  // g_queues
std::vector<ThreadQueue*> g_queues;
std::mutex g_drain_mu;  // one consumer at a time
std::mutex g_names_mu;  // g_names, g_name_ids
std::vector<const char*> g_names;
std::unordered_map<std::string_view, int32_t> g_name_ids;
std::atomic<uint64_t> g_dropped_freed{0};  // drops of queues already freed

// Muting: every op nested in a recorded one still pays torch's RecordFunction machinery (about
// 70 ns each, measured with an empty callback: F.linear runs 10 observed ops, an autograd node
// or a compiled region many more), although only the outermost is recorded. Turning
// RecordFunction off for the thread while such an op runs (at::enableRecordFunction, about
// 350 ns for the pair) sends the nested ops down the dispatcher's fast path. Whether that pays
// is learnt per op name: the first kLearnCalls calls count their nested ops, and names averaging
// kMuteNested or more are muted from then on. Never while another observer could miss the nested
// ops: thread-local callbacks on the thread (torch.profiler), or another global callback.
constexpr int32_t kPolicyNames = 8192;
constexpr uint32_t kLearnCalls = 8;
constexpr uint32_t kMuteNested = 5;
std::atomic<uint32_t> g_learn_calls[kPolicyNames];
std::atomic<uint32_t> g_learn_nested[kPolicyNames];
std::atomic<int8_t> g_mute[kPolicyNames];  // 0 learning, 1 mute, -1 never
std::atomic<bool> g_muting{true};          // tn_set_muting
std::atomic<bool> g_alone{false};          // ours is the only global callback (check_alone)
std::atomic<uint64_t> g_muted_ops{0};      // outermost ops that ran muted (tn_muted_ops)

inline bool should_mute(int32_t name) {
  return name >= 0 && name < kPolicyNames && g_mute[name].load(std::memory_order_relaxed) == 1 &&
         g_muting.load(std::memory_order_relaxed) && g_alone.load(std::memory_order_relaxed) &&
         !at::hasThreadLocalCallbacks();
}

void learn(int32_t name, int32_t nested) {
  if (name < 0 || name >= kPolicyNames || g_mute[name].load(std::memory_order_relaxed) != 0) return;
  uint32_t total = g_learn_nested[name].fetch_add(nested, std::memory_order_relaxed) + nested;
  uint32_t calls = g_learn_calls[name].fetch_add(1, std::memory_order_relaxed) + 1;
  if (calls >= kLearnCalls) g_mute[name].store(total >= kMuteNested * calls ? 1 : -1, std::memory_order_relaxed);
}

std::mutex g_state_mu;                    // g_handle; writes of g_enabled
at::CallbackHandle g_handle = 0;
std::atomic<bool> g_enabled{false};  // the callback is registered and enabled
bool g_atfork = false;

inline int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int32_t intern_slow(Tls& t, CacheEntry& e, const char* p) {
  int32_t id;
  const char* interned;
  {
    std::lock_guard<std::mutex> g(g_names_mu);
    auto it = g_name_ids.find(std::string_view(p));
    if (it != g_name_ids.end()) {
      id = it->second;
    } else {
      char* copy = strdup(p);
      if (copy == nullptr) return -1;
      id = static_cast<int32_t>(g_names.size());
      g_names.push_back(copy);
      g_name_ids.emplace(std::string_view(copy), id);
    }
    interned = g_names[id];
  }
  e = CacheEntry{p, interned, id};
  (void)t;
  return id;
}

inline int32_t intern(Tls& t, const char* p) {
  if (p == nullptr) p = "";
  uint64_t h = (reinterpret_cast<uintptr_t>(p) * 0x9E3779B97F4A7C15ull) >> 58;
  CacheEntry& e = t.cache[h];
  // the address alone is not enough: autograd node names are temporary strings whose
  // addresses get reused for other names
  if (e.ptr == p && std::strcmp(e.interned, p) == 0) return e.id;
  return intern_slow(t, e, p);
}

ThreadQueue* register_thread(Tls& t) {
  auto* q = new (std::nothrow) ThreadQueue;
  Chunk* c = q != nullptr ? new (std::nothrow) Chunk : nullptr;
  if (c == nullptr) {
    delete q;
    t.failed = true;
    return nullptr;
  }
  q->head = q->tail = c;
  q->tid = static_cast<int64_t>(syscall(SYS_gettid));
  exit_mark.queue = q;
  {
    std::lock_guard<std::mutex> g(g_queues_mu);
    g_queues.push_back(q);
  }
  t.queue = q;
  return q;
}

inline void push(Tls& t, int64_t start, int64_t end, int32_t name) {
  ThreadQueue* q = t.queue;
  if (q == nullptr) {
    if (t.failed || (q = register_thread(t)) == nullptr) return;
  }
  Chunk* c = q->tail;
  uint32_t n = c->count.load(std::memory_order_relaxed);
  if (n == kChunkRecords) {
    Chunk* fresh = nullptr;
    if (q->chunks.load(std::memory_order_relaxed) < kMaxChunks) fresh = new (std::nothrow) Chunk;
    if (fresh == nullptr) {
      q->drops.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    q->chunks.fetch_add(1, std::memory_order_relaxed);
    c->next.store(fresh, std::memory_order_release);
    q->tail = c = fresh;
    n = 0;
  }
  c->slots[n] = Slot{start, end, name, 0};
  c->count.store(n + 1, std::memory_order_release);
}

// The outermost op of the thread begins: name, muting decision, start time (last, so that the
// callback's own cost stays outside the interval).
inline void begin_outermost(Tls& t, const char* name) {
  t.name = intern(t, name);
  t.nested = 0;
  t.muted = false;
  if (should_mute(t.name)) {
    at::enableRecordFunction(false);
    t.muted = true;
    g_muted_ops.fetch_add(1, std::memory_order_relaxed);
  }
  t.start = now_ns();
}

// ... and ends: end time first, then unmute or learn, then the record.
inline void end_outermost(Tls& t) {
  int64_t end = now_ns();
  if (t.muted) {
    t.muted = false;
    at::enableRecordFunction(true);
  } else {
    learn(t.name, t.nested);
  }
  push(t, t.start, end, t.name);
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  Tls& t = tls;
  if (t.depth++ != 0) {
    ++t.nested;
    return nullptr;
  }
  begin_outermost(t, fn.name());
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  (void)fn;
  Tls& t = tls;
  if (t.depth <= 0) {  // an end without its start (cannot happen with balanced scopes): ignore
    t.depth = 0;
    return;
  }
  if (--t.depth == 0) end_outermost(t);
}

// Whether the RecordFunction callbacks a FUNCTION op on this thread would run are ours alone.
// Called on start/enable and at every drain (the writer thread, once per flush): a global
// observer added later is noticed within a flush interval.
void check_alone() {
  bool alone = false;
  try {
    at::StepCallbacks sc = at::getStepCallbacks(at::RecordScope::FUNCTION);
    alone = true;
    for (const auto& cb : sc.callbacks_) alone = alone && cb.start_ == on_start;
  } catch (...) {
  }
  g_alone.store(alone, std::memory_order_relaxed);
}

void free_chain(Chunk* c) {
  while (c != nullptr) {
    Chunk* next = c->next.load(std::memory_order_acquire);
    delete c;
    c = next;
  }
}

// Drain one queue into the output arrays (consumer side, under g_drain_mu).
size_t drain_queue(ThreadQueue* q, int64_t* start, int64_t* end, int64_t* tid, int32_t* name, size_t max) {
  size_t out = 0;
  Chunk* c = q->head;
  while (out < max) {
    uint32_t n = c->count.load(std::memory_order_acquire);
    uint32_t take = n - q->head_pos;
    if (take > max - out) take = static_cast<uint32_t>(max - out);
    const Slot* s = c->slots + q->head_pos;
    for (uint32_t i = 0; i < take; ++i) {
      start[out + i] = s[i].start;
      end[out + i] = s[i].end;
      tid[out + i] = q->tid;
      name[out + i] = s[i].name;
    }
    out += take;
    q->head_pos += take;
    if (q->head_pos < kChunkRecords) break;  // the producer is still filling this chunk
    Chunk* next = c->next.load(std::memory_order_acquire);
    if (next == nullptr) break;  // full, and the producer has not moved on yet
    delete c;  // the producer never touches a chunk after linking its successor
    q->chunks.fetch_sub(1, std::memory_order_relaxed);
    q->head = c = next;
    q->head_pos = 0;
  }
  return out;
}

size_t queue_pending(const ThreadQueue* q) {
  size_t n = 0;
  uint32_t pos = q->head_pos;
  for (Chunk* c = q->head; c != nullptr; c = c->next.load(std::memory_order_acquire)) {
    n += c->count.load(std::memory_order_acquire) - pos;
    pos = 0;
  }
  return n;
}

std::vector<ThreadQueue*> snapshot() {
  std::lock_guard<std::mutex> g(g_queues_mu);
  return g_queues;
}

void atfork_prepare() {
  g_state_mu.lock();
  g_drain_mu.lock();
  g_queues_mu.lock();
  g_names_mu.lock();
}

void atfork_parent() {
  g_names_mu.unlock();
  g_queues_mu.unlock();
  g_drain_mu.unlock();
  g_state_mu.unlock();
}

// In a forked child only the forking thread survives, and the records so far are the parent's:
// free the other threads' queues and empty this thread's.
void atfork_child() {
  g_names_mu.unlock();
  g_queues_mu.unlock();
  g_drain_mu.unlock();
  g_state_mu.unlock();
  ThreadQueue* mine = tls.queue;
  std::vector<ThreadQueue*> keep;
  for (ThreadQueue* q : g_queues) {
    if (q == mine) {
      Chunk* fresh = new (std::nothrow) Chunk;
      if (fresh == nullptr) {
        keep.push_back(q);
        continue;
      }
      free_chain(q->head);
      q->head = q->tail = fresh;
      q->head_pos = 0;
      q->chunks.store(1);
      q->drops.store(0);
      q->tid = static_cast<int64_t>(syscall(SYS_gettid));
      keep.push_back(q);
    } else {
      free_chain(q->head);
      delete q;
    }
  }
  g_queues.swap(keep);
  g_dropped_freed.store(0);
}

}  // namespace

extern "C" {

// Layout/behaviour version, checked by the Python side.
int tn_abi_version() { return 1; }

// Add the global callback (idempotent: a forked child inherits the parent's). 0 ok, -1 failed.
int tn_start() {
  std::lock_guard<std::mutex> g(g_state_mu);
  if (!g_atfork) {
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    g_atfork = true;
  }
  try {
    if (g_handle == 0) {
      g_handle = at::addGlobalCallback(
          at::RecordFunctionCallback(on_start, on_end)
              .needsInputs(false)
              .needsOutputs(false)
              .needsIds(false)
              .scopes({at::RecordScope::FUNCTION}));
    } else if (!g_enabled.load()) {
      at::reenableCallback(g_handle);
    }
    g_enabled.store(true);
  } catch (...) {
    return -1;
  }
  check_alone();
  return 0;
}

// Remove the callback. Ops still running finish their records (their end callback stays valid).
void tn_stop() {
  std::lock_guard<std::mutex> g(g_state_mu);
  if (g_handle != 0) {
    try {
      at::removeCallback(g_handle);
    } catch (...) {
    }
    g_handle = 0;
  }
  g_enabled.store(false);
}

// Switch recording on or off at run time. Off disables the callback in torch's callback manager,
// so the dispatcher takes its no-observer fast path: nothing of rlscope runs per op.
void tn_enable(int on) {
  std::lock_guard<std::mutex> g(g_state_mu);
  if (g_handle == 0 || g_enabled.load() == (on != 0)) return;
  try {
    if (on) {
      at::reenableCallback(g_handle);
    } else {
      at::disableCallback(g_handle);
    }
    g_enabled.store(on != 0);
  } catch (...) {
  }
  check_alone();
}

int tn_enabled() { return g_enabled.load() ? 1 : 0; }

// A call from Python recorded like an op: the autograd engine's backward/grad, which runs no
// dispatcher op on the calling thread for most of its time (on CUDA the nodes run on the engine's
// device threads while the caller waits; on CPU the engine's own work lies between the nodes).
// Returns 1 when it counted (then call tn_exit), 0 when recording is off. Muted like an op: the
// engine's device threads then inherit the muting with the caller's ThreadLocalState, and their
// nodes, nested in this record, are not recorded one by one either.
int tn_enter(const char* name) {
  if (!g_enabled.load(std::memory_order_relaxed)) return 0;
  Tls& t = tls;
  if (t.depth++ != 0) {
    ++t.nested;
    return 1;
  }
  begin_outermost(t, name);
  return 1;
}

void tn_exit() {
  Tls& t = tls;
  if (t.depth <= 0) {
    t.depth = 0;
    return;
  }
  if (--t.depth == 0) end_outermost(t);
}

// Muting of nested ops on (1, default) or off (0): off measures what it saves.
void tn_set_muting(int on) { g_muting.store(on != 0); }

// Outermost ops that ran with their nested ops muted (since the process started).
uint64_t tn_muted_ops() { return g_muted_ops.load(std::memory_order_relaxed); }

// Per learnt name: 1 muted, -1 not, 0 still learning (tests and the benchmark report it).
int tn_mute_state(int32_t name) {
  return name >= 0 && name < kPolicyNames ? g_mute[name].load(std::memory_order_relaxed) : -1;
}

// Records waiting to be drained (all threads; a lower bound while threads keep recording).
size_t tn_pending() {
  std::lock_guard<std::mutex> g(g_drain_mu);
  size_t n = 0;
  for (ThreadQueue* q : snapshot()) n += queue_pending(q);
  return n;
}

// Move up to `max` records into the arrays; returns how many. Frees the queues of exited threads.
size_t tn_drain(int64_t* start, int64_t* end, int64_t* tid, int32_t* name, size_t max) {
  check_alone();
  std::lock_guard<std::mutex> g(g_drain_mu);
  size_t out = 0;
  std::vector<ThreadQueue*> done;
  for (ThreadQueue* q : snapshot()) {
    bool finished = q->finished.load(std::memory_order_acquire);  // before draining: see all
    out += drain_queue(q, start + out, end + out, tid + out, name + out, max - out);
    if (finished && queue_pending(q) == 0) done.push_back(q);
    if (out == max) break;
  }
  if (!done.empty()) {
    std::lock_guard<std::mutex> gq(g_queues_mu);
    for (ThreadQueue* q : done) {
      std::erase(g_queues, q);
      g_dropped_freed.fetch_add(q->drops.load(), std::memory_order_relaxed);
      free_chain(q->head);
      delete q;
    }
  }
  return out;
}

// Records dropped because a thread's queue was full (since the process started).
uint64_t tn_drops() {
  std::lock_guard<std::mutex> g(g_drain_mu);  // queues are freed under it
  uint64_t n = g_dropped_freed.load(std::memory_order_relaxed);
  for (ThreadQueue* q : snapshot()) n += q->drops.load(std::memory_order_relaxed);
  return n;
}

// Interned op names: ids 0 .. tn_num_names()-1; the text stays valid for the process's life.
int32_t tn_num_names() {
  std::lock_guard<std::mutex> g(g_names_mu);
  return static_cast<int32_t>(g_names.size());
}

const char* tn_name(int32_t id) {
  std::lock_guard<std::mutex> g(g_names_mu);
  if (id < 0 || static_cast<size_t>(id) >= g_names.size()) return "";
  return g_names[id];
}

// The recorder's clock (tests compare it with time.perf_counter_ns).
int64_t tn_now() { return now_ns(); }

// This thread's id as the recorder writes it.
int64_t tn_gettid() { return static_cast<int64_t>(syscall(SYS_gettid)); }

}  // extern "C"
