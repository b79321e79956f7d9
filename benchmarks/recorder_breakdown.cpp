// Where the native backend recorder's time goes per torch op (benchmarks/recorder_breakdown.py).
//
// The recorder itself (collectors/torch_native.cpp, included whole: its tn_* functions are this
// library's too) plus C++ loops that call one aten op n times and return the thread CPU ns per
// call, and stand-in global RecordFunction callbacks that do a part of the recorder's work each:
//   1 empty         what torch's RecordFunction machinery costs per observed op with any callback
//   2 clocks        + the depth counter and the two clock reads of the outermost op
//   3 + intern      + the op's name interned
//   4 + push        + the record pushed into the thread's queue (the recorder without muting)
// No Python between the calls: the figures are the floor of what a call from Python pays.

#include "../collectors/torch_native.cpp"

#include <ATen/ATen.h>

namespace {

inline int64_t cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

thread_local int32_t b_depth = 0;
thread_local int64_t b_start = 0;
thread_local int64_t b_sink = 0;

std::unique_ptr<at::ObserverContext> empty_start(const at::RecordFunction&) { return nullptr; }
void empty_end(const at::RecordFunction&, at::ObserverContext*) {}

std::unique_ptr<at::ObserverContext> clocks_start(const at::RecordFunction&) {
  if (b_depth++ == 0) b_start = now_ns();
  return nullptr;
}
void clocks_end(const at::RecordFunction&, at::ObserverContext*) {
  if (--b_depth == 0) b_sink += now_ns() - b_start;
}

std::unique_ptr<at::ObserverContext> intern_start(const at::RecordFunction& fn) {
  if (b_depth++ == 0) {
    tls.name = intern(tls, fn.name());
    b_start = now_ns();
  }
  return nullptr;
}
void push_end(const at::RecordFunction&, at::ObserverContext*) {
  if (--b_depth == 0) push(tls, b_start, now_ns(), tls.name);
}

at::CallbackHandle g_stand_in = 0;
at::Tensor g_a, g_b, g_x, g_w, g_bias;

}  // namespace

extern "C" {

// Register stand-in callback `which` (1-4, above) in place of the previous one; 0: none.
void rb_stand_in(int which) {
  if (g_stand_in != 0) {
    at::removeCallback(g_stand_in);
    g_stand_in = 0;
  }
  at::RecordFunctionCallback::StartCallback start = nullptr;
  at::RecordFunctionCallback::EndCallback end = nullptr;
  if (which == 1) start = empty_start, end = empty_end;
  if (which == 2) start = clocks_start, end = clocks_end;
  if (which == 3) start = intern_start, end = clocks_end;
  if (which == 4) start = intern_start, end = push_end;
  if (start == nullptr) return;
  g_stand_in = at::addGlobalCallback(at::RecordFunctionCallback(start, end)
                                         .needsInputs(false)
                                         .needsOutputs(false)
                                         .needsIds(false)
                                         .scopes({at::RecordScope::FUNCTION}));
}

// Thread CPU ns per call of op `which` (0 add of two 4-vectors, 1 relu of 2x8, 2 linear 2x8 by 8x8).
double rb_op(int which, int n) {
  if (!g_a.defined()) {
    g_a = at::randn({4});
    g_b = at::randn({4});
    g_x = at::randn({2, 8});
    g_w = at::randn({8, 8});
    g_bias = at::randn({8});
  }
  int64_t t0 = cpu_ns();
  for (int i = 0; i < n; ++i) {
    if (which == 0) at::add(g_a, g_b);
    if (which == 1) at::relu(g_x);
    if (which == 2) at::linear(g_x, g_w, g_bias);
  }
  return static_cast<double>(cpu_ns() - t0) / n;
}

// Thread CPU ns per at::enableRecordFunction(false) + (true) pair: what muting an op costs.
double rb_toggle(int n) {
  int64_t t0 = cpu_ns();
  for (int i = 0; i < n; ++i) {
    at::enableRecordFunction(false);
    at::enableRecordFunction(true);
  }
  return static_cast<double>(cpu_ns() - t0) / n;
}

// Thread CPU ns per clock read of the recorder (clock_gettime(CLOCK_MONOTONIC)).
double rb_clock(int n) {
  int64_t t0 = cpu_ns();
  int64_t sum = 0;
  for (int i = 0; i < n; ++i) sum += now_ns();
  b_sink += sum;
  return static_cast<double>(cpu_ns() - t0) / n;
}

// Records waiting in this library's queues are dropped (the benchmark reads none).
void rb_discard() {
  std::vector<int64_t> a(kChunkRecords), b(kChunkRecords), c(kChunkRecords);
  std::vector<int32_t> d(kChunkRecords);
  while (tn_drain(a.data(), b.data(), c.data(), d.data(), kChunkRecords) > 0) {
  }
}

}  // extern "C"
