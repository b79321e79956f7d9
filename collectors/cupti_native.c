/* rlscope's native CUPTI activity consumer.
 *
 * Why native: cupti-python turns every activity record into a Python object (several us each),
 * which on a launch-bound RL workload costs more than the work being measured. Here CUPTI's
 * buffer-completed callback copies each record into a flat array of fixed-size rows (no Python,
 * no GIL); Python drains the array in bulk from the writer thread.
 */
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 rl_kernel_t;
typedef CUpti_ActivityMemcpy6 rl_memcpy_t;
#else
typedef CUpti_ActivityKernel9 rl_kernel_t;
typedef CUpti_ActivityMemcpy5 rl_memcpy_t;
#endif
typedef CUpti_ActivityMemset4 rl_memset_t;

typedef struct {
  int64_t start, end, corr, thread, stream, bytes;
  int32_t name;    /* >= 0: kernel name id; memcpy: -100 - copyKind (-200 - copyKind when its host side is
                      pageable memory); memset: -1; API: -(domain*1e6 + cbid) */
  int16_t device;
  int8_t category; /* 3 cuda_api, 4 kernel, 5 memcpy, 6 memset (rlscope.categories) */
  int8_t pad;
  /* kernel rows: launch resources (occupancy, rlscope/analysis/occupancy.py); 0 otherwise */
  int32_t grid[3], block[3], static_smem, dynamic_smem, registers, pad2;
} rl_row;

#define BUF_SIZE (8u << 20)
static rl_row *rows;
static size_t n_rows, cap_rows;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* kernel names: CUPTI shares one name pointer per kernel, so intern by pointer */
static const char **name_ptr;  /* open-addressing table of pointers */
static int32_t *name_id;
static size_t name_cap;
static char **names;
static size_t n_names;

static int32_t intern_name(const char *p) {
  if (!p) p = "<kernel>";
  if (2 * (n_names + 1) > name_cap) {
    size_t cap = name_cap ? 2 * name_cap : 1024;
    const char **np = calloc(cap, sizeof *np);
    int32_t *ni = calloc(cap, sizeof *ni);
    for (size_t i = 0; i < name_cap; i++)
      if (name_ptr[i]) {
        size_t h = ((uintptr_t)name_ptr[i] >> 4) & (cap - 1);
        while (np[h]) h = (h + 1) & (cap - 1);
        np[h] = name_ptr[i];
        ni[h] = name_id[i];
      }
    free(name_ptr);
    free(name_id);
    name_ptr = np;
    name_id = ni;
    name_cap = cap;
    names = realloc(names, cap * sizeof *names);
  }
  size_t h = ((uintptr_t)p >> 4) & (name_cap - 1);
  while (name_ptr[h]) {
    if (name_ptr[h] == p) return name_id[h];
    h = (h + 1) & (name_cap - 1);
  }
  name_ptr[h] = p;
  name_id[h] = (int32_t)n_names;
  names[n_names] = strdup(p);
  return (int32_t)n_names++;
}

/* CUPTI restarts correlation ids when it is attached again after cuptiFinalize (rl_set_enabled
   with detaching): each attachment is an epoch, kept in the high bits so ids never collide. */
static int64_t epoch;
#define EPOCH_CORR(c) ((int64_t)(c) + (epoch << 40))

static rl_row *push_row(void) {
  if (n_rows == cap_rows) {
    cap_rows = cap_rows ? 2 * cap_rows : 65536;
    rows = realloc(rows, cap_rows * sizeof *rows);
  }
  rl_row *r = &rows[n_rows++];
  memset(r, 0, sizeof *r);
  return r;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, BUF_SIZE);
  *size = *buffer ? BUF_SIZE : 0;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
  CUpti_Activity *rec = NULL;
  pthread_mutex_lock(&mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    rl_row *r;
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        rl_kernel_t *k = (rl_kernel_t *)rec;
        r = push_row();
        r->category = 4; r->start = k->start; r->end = k->end; r->corr = EPOCH_CORR(k->correlationId);
        r->device = k->deviceId; r->stream = k->streamId; r->name = intern_name(k->name); r->thread = -1;
        r->grid[0] = k->gridX; r->grid[1] = k->gridY; r->grid[2] = k->gridZ;
        r->block[0] = k->blockX; r->block[1] = k->blockY; r->block[2] = k->blockZ;
        r->registers = k->registersPerThread;
        r->static_smem = k->staticSharedMemory; r->dynamic_smem = k->dynamicSharedMemory;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        rl_memcpy_t *m = (rl_memcpy_t *)rec;
        r = push_row();
        r->category = 5; r->start = m->start; r->end = m->end; r->corr = EPOCH_CORR(m->correlationId);
        r->device = m->deviceId; r->stream = m->streamId; r->bytes = m->bytes;
        /* pageable host memory: the driver stages the copy and the caller blocks (advice: pageable_copies) */
        int pageable = m->srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE ||
                       m->dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
        r->name = (pageable ? -200 : -100) - (int32_t)m->copyKind; r->thread = -1;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        rl_memset_t *m = (rl_memset_t *)rec;
        r = push_row();
        r->category = 6; r->start = m->start; r->end = m->end; r->corr = EPOCH_CORR(m->correlationId);
        r->device = m->deviceId; r->stream = m->streamId; r->bytes = m->bytes; r->name = -1; r->thread = -1;
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)rec;
        r = push_row();
        r->category = 3; r->start = a->start; r->end = a->end; r->corr = EPOCH_CORR(a->correlationId);
        r->thread = (int64_t)a->threadId; r->device = -1; r->stream = -1;
        r->name = -(int32_t)((rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? 1000000 : 2000000) + a->cbid);
        break;
      }
      default:
        break;
    }
  }
  pthread_mutex_unlock(&mu);
  free(buffer);
}

static const CUpti_ActivityKind KINDS[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                           CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
                                           CUPTI_ACTIVITY_KIND_DRIVER};
#define N_KINDS (sizeof KINDS / sizeof KINDS[0])

static unsigned enabled_mask;  /* which of KINDS rl_start_kinds turned on */
static int tracing_on;

/* API records rlscope skips: pure queries that launch nothing, so no GPU record correlates with
   them, and that a PyTorch launch makes several of (cudaGetDevice, cudaGetLastError, ...). Each
   record costs CUPTI CPU time on the job's thread (0.3-0.6 us on the H100, benchmarks/
   cupti_cost.py), more than the query itself takes. Skipped per callback id with CUPTI's
   cuptiActivityEnableRuntimeApi / cuptiActivityEnableDriverApi (looked up at run time: older
   CUPTIs lack them, and then everything is recorded). Names are compared without the _vNNNN
   suffix; RLSCOPE_CUPTI_QUERIES=1 (rl_set_skip_queries(0)) records them all. */
static const char *const QUERY_APIS[] = {
    /* runtime */
    "cudaGetDevice", "cudaGetDeviceCount", "cudaGetLastError", "cudaPeekAtLastError",
    "cudaStreamIsCapturing", "cudaStreamGetCaptureInfo", "cudaDeviceGetAttribute",
    "cudaPointerGetAttributes", "cudaGetDeviceProperties", "cudaFuncGetAttributes",
    "cudaDriverGetVersion", "cudaRuntimeGetVersion", "cudaGetErrorString", "cudaGetErrorName",
    "cudaThreadExchangeStreamCaptureMode", "cudaStreamGetPriority", "cudaStreamGetFlags",
    "cudaStreamGetId", "cudaDeviceGetStreamPriorityRange", "cudaGetDriverEntryPoint",
    "cudaGetDriverEntryPointByVersion", "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", "cudaStreamQuery", "cudaEventQuery",
    /* driver */
    "cuCtxGetCurrent", "cuCtxGetDevice", "cuCtxGetId", "cuCtxGetFlags", "cuCtxGetStreamPriorityRange",
    "cuDeviceGet", "cuDeviceGetAttribute", "cuDeviceGetCount", "cuDevicePrimaryCtxGetState",
    "cuDriverGetVersion", "cuGetProcAddress", "cuGetErrorString", "cuGetErrorName",
    "cuPointerGetAttribute", "cuPointerGetAttributes", "cuStreamIsCapturing", "cuStreamGetCaptureInfo",
    "cuStreamGetCtx", "cuStreamGetId", "cuStreamGetFlags", "cuStreamGetPriority", "cuFuncGetAttribute",
    "cuKernelGetAttribute", "cuOccupancyMaxActiveBlocksPerMultiprocessor",
    "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", "cuStreamQuery", "cuEventQuery",
    "cuKernelGetName", "cuFuncGetName", NULL};

typedef CUptiResult (*enable_api_fn)(CUpti_CallbackId, uint8_t);
typedef CUptiResult (*callback_name_fn)(CUpti_CallbackDomain, uint32_t, const char **);

static int skip_queries = 1;
static CUpti_CallbackId *skipped[2]; /* [0] runtime, [1] driver: the ids found by name, once */
static int n_skipped[2] = {-1, -1};
static int n_skip_applied;

void rl_set_skip_queries(int on) { skip_queries = on; }

/* a symbol of libcupti that this CUPTI may lack */
static void *cupti_symbol(const char *name) {
  Dl_info info;
  if (!dladdr((void *)cuptiActivityEnable, &info) || !info.dli_fname) return NULL;
  void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  return h ? dlsym(h, name) : NULL;
}

/* "cudaGetDevice_v3020" names the API "cudaGetDevice" */
static int is_query(const char *name) {
  if (!name) return 0;
  size_t n = strlen(name);
  const char *v = strstr(name, "_v");
  if (v && v[2] >= '0' && v[2] <= '9') n = (size_t)(v - name);
  for (size_t i = 0; QUERY_APIS[i]; i++)
    if (strlen(QUERY_APIS[i]) == n && strncmp(QUERY_APIS[i], name, n) == 0) return 1;
  return 0;
}

/* API names by callback id, looked up once while CUPTI is attached (fill_api_names, at the first
   attach): the writer thread names API records while CUPTI may be detached, and a CUPTI call then
   could attach it again. */
static const char **api_names[2]; /* [0] runtime, [1] driver */

static const char *lookup_api_name(int driver, uint32_t cbid) {
  static callback_name_fn get_name;
  static int looked;
  if (!looked) {
    get_name = (callback_name_fn)cupti_symbol("cuptiGetCallbackName");
    looked = 1;
  }
  const char *name = NULL;
  if (get_name && get_name(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) != CUPTI_SUCCESS)
    name = NULL;
  return name ? name : "";
}

static void fill_api_names(void) {
  const uint32_t size[2] = {CUPTI_RUNTIME_TRACE_CBID_SIZE, CUPTI_DRIVER_TRACE_CBID_SIZE};
  for (int d = 0; d < 2; d++) {
    if (api_names[d]) continue;
    const char **t = calloc(size[d], sizeof *t);
    if (!t) continue;
    for (uint32_t cbid = 0; cbid < size[d]; cbid++) t[cbid] = lookup_api_name(d, cbid);
    api_names[d] = t;
  }
}

const char *rl_api_name(int driver, uint32_t cbid) {
  int d = driver ? 1 : 0;
  const uint32_t size = d ? CUPTI_DRIVER_TRACE_CBID_SIZE : CUPTI_RUNTIME_TRACE_CBID_SIZE;
  if (!api_names[d] || cbid >= size) return "";
  return api_names[d][cbid];
}

/* Switch the query APIs' records off (after the RUNTIME / DRIVER kinds are enabled: CUPTI keeps
   the per-id setting only while attached, so every attachment applies it again). */
static void apply_skip_queries(unsigned mask) {
  n_skip_applied = 0;
  if (!skip_queries) return;
  static enable_api_fn enable[2];
  static int looked;
  if (!looked) {
    enable[0] = (enable_api_fn)cupti_symbol("cuptiActivityEnableRuntimeApi");
    enable[1] = (enable_api_fn)cupti_symbol("cuptiActivityEnableDriverApi");
    looked = 1;
  }
  const uint32_t size[2] = {CUPTI_RUNTIME_TRACE_CBID_SIZE, CUPTI_DRIVER_TRACE_CBID_SIZE};
  const unsigned bit[2] = {1u << 3, 1u << 4}; /* runtime and driver in KINDS */
  for (int d = 0; d < 2; d++) {
    if (!enable[d] || !(mask & bit[d])) continue;
    if (n_skipped[d] < 0) {
      skipped[d] = calloc(size[d], sizeof **skipped);
      n_skipped[d] = 0;
      for (uint32_t cbid = 1; skipped[d] && cbid < size[d]; cbid++)
        if (is_query(lookup_api_name(d, cbid))) skipped[d][n_skipped[d]++] = cbid;
    }
    for (int i = 0; i < n_skipped[d]; i++)
      if (enable[d](skipped[d][i], 0) == CUPTI_SUCCESS) n_skip_applied++;
  }
}

/* how many API ids the current attachment skips (0: none, or this CUPTI cannot) */
int rl_skipped_apis(void) { return n_skip_applied; }

/* Every call into CUPTI that could attach it (enable, flush, finalize, its clock) takes this lock and
   checks the state under it. Without it the writer thread's flush (a forced flush, the clock read
   before it, both outside the GIL) could run beside the main thread's switch into a light window
   and reach CUPTI after its cuptiFinalize, attaching it again with its kinds off: the +20-30%
   state of RLSCOPE_CUPTI_DETACH=0 for the rest of that light window. Found by reading the code;
   tests/test_cupti_detach_gpu.py holds a light window after many switches with the writer
   flushing every 2 ms. */
static pthread_mutex_t cupti_mu = PTHREAD_MUTEX_INITIALIZER;

/* CUPTI is attached to the process: from the first start until a detach (cuptiFinalize). Kinds
   switched off without detaching (a light window begun off the main thread) leave it attached. */
static int attached;

/* Enable the kinds whose bit is set in mask (bit i: KINDS[i]); all of them is rl_start(). Every
   call attaches CUPTI (again, after a detach): a new epoch. */
static int start_kinds_locked(unsigned mask) {
  epoch++;
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) return (int)r;
  fill_api_names();
  for (size_t i = 0; i < N_KINDS; i++) {
    if (!(mask & (1u << i))) continue;
    r = cuptiActivityEnable(KINDS[i]);
    if (r != CUPTI_SUCCESS) {
      for (size_t j = 0; j < i; j++)
        if (mask & (1u << j)) cuptiActivityDisable(KINDS[j]);
      return (int)r;
    }
  }
  enabled_mask = mask;
  tracing_on = 1;
  attached = 1;
  apply_skip_queries(mask);
  return 0;
}

int rl_start_kinds(unsigned mask) {
  pthread_mutex_lock(&cupti_mu);
  int r = start_kinds_locked(mask);
  pthread_mutex_unlock(&cupti_mu);
  return r;
}

int rl_start(void) { return rl_start_kinds((1u << N_KINDS) - 1); }

/* Switch the started kinds off and on again (rlscope's windows without GPU tracing). With
   detach, switching off also detaches CUPTI from the process (cuptiFinalize, after a forced flush),
   since disabled activity kinds still leave CUPTI's API interception in place (benchmarks/
   cupti_cost.py measures both); switching on attaches it again as a new epoch. */
static int detach_when_off;

void rl_set_detach(int on) { detach_when_off = on; }

/* Detach CUPTI from the process, its buffers first drained into rows; rl_start_kinds attaches it. */
static CUptiResult detach(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  attached = 0;
  return cuptiFinalize();
}

/* detached: any CUPTI call would attach it again (read under cupti_mu) */
static int detached(void) { return !attached; }

static int set_enabled_locked(int on) {
  if ((on != 0) == tracing_on) return 0;
  if (on && !attached) return start_kinds_locked(enabled_mask);
  CUptiResult first = CUPTI_SUCCESS;
  for (size_t i = 0; i < N_KINDS; i++) {
    if (!(enabled_mask & (1u << i))) continue;
    CUptiResult r = on ? cuptiActivityEnable(KINDS[i]) : cuptiActivityDisable(KINDS[i]);
    if (r != CUPTI_SUCCESS && first == CUPTI_SUCCESS) first = r;
  }
  tracing_on = on != 0;
  if (on) apply_skip_queries(enabled_mask);
  if (!on && detach_when_off) {
    CUptiResult r = detach();
    if (r != CUPTI_SUCCESS && first == CUPTI_SUCCESS) first = r;
  }
  return (int)first;
}

int rl_set_enabled(int on) {
  pthread_mutex_lock(&cupti_mu);
  int r = set_enabled_locked(on);
  pthread_mutex_unlock(&cupti_mu);
  return r;
}

/* Detach now if the kinds are off but CUPTI is still attached (a light window begun off the main
   thread, where detaching is not safe): called on the main thread at its next scope exit. */
int rl_detach_now(void) {
  pthread_mutex_lock(&cupti_mu);
  int r = 0;
  if (attached && !tracing_on && detach_when_off) r = (int)detach();
  pthread_mutex_unlock(&cupti_mu);
  return r;
}

static int flush_locked(int forced) {
  if (detached()) return 0;
  return (int)cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

int rl_flush(int forced) {
  pthread_mutex_lock(&cupti_mu);
  int r = flush_locked(forced);
  pthread_mutex_unlock(&cupti_mu);
  return r;
}

/* End of the session. With detaching (the default) CUPTI is detached too: attached with its kinds
   off it still intercepts every API call (+3 us a launch on the H100), which the rest of the
   user's program should not pay. A later session attaches it again (rl_start_kinds). */
int rl_stop(void) {
  pthread_mutex_lock(&cupti_mu);
  int r = flush_locked(1);
  if (tracing_on) {
    for (size_t i = 0; i < N_KINDS; i++)
      if (enabled_mask & (1u << i)) cuptiActivityDisable(KINDS[i]);
  }
  if (attached && detach_when_off) detach();
  tracing_on = 0;
  pthread_mutex_unlock(&cupti_mu);
  return r;
}

size_t rl_row_size(void) { return sizeof(rl_row); }

size_t rl_drain(rl_row *out, size_t max) {
  pthread_mutex_lock(&mu);
  size_t n = n_rows < max ? n_rows : max;
  memcpy(out, rows, n * sizeof *rows);
  memmove(rows, rows + n, (n_rows - n) * sizeof *rows);
  n_rows -= n;
  pthread_mutex_unlock(&mu);
  return n;
}

size_t rl_pending(void) {
  pthread_mutex_lock(&mu);
  size_t n = n_rows;
  pthread_mutex_unlock(&mu);
  return n;
}

int32_t rl_num_names(void) {
  pthread_mutex_lock(&mu);
  int32_t n = (int32_t)n_names;
  pthread_mutex_unlock(&mu);
  return n;
}

const char *rl_name(int32_t i) { return (i >= 0 && (size_t)i < n_names) ? names[i] : ""; }

/* CUPTI's clock; 0 while detached (reading it would attach CUPTI again). */
uint64_t rl_timestamp(void) {
  uint64_t t = 0;
  pthread_mutex_lock(&cupti_mu);
  if (!detached()) cuptiGetTimestamp(&t);
  pthread_mutex_unlock(&cupti_mu);
  return t;
}

const char *rl_error(int code) {
  const char *s = "unknown CUPTI error";
  cuptiGetResultString((CUptiResult)code, &s);
  return s;
}
