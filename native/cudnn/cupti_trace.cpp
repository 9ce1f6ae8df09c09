// CUPTI's activity API as ac_cudnn's device profiler (cupti_trace.h). CUPTI hands records back in buffers this
// file allocates (buffer_requested) and gets back full or flushed (buffer_completed, on CUPTI's own thread or in
// cuptiActivityFlushAll); each record becomes a trace::Event (native/common/chrome_trace.h), which writes them as
// the Chrome trace measure/profiled.py reads. The callbacks are registered once per process; the activity kinds
// are enabled only for the profiled loop, so that no timed call runs under CUPTI (and the conductor times no call
// of a worker after its first profiled pass: docs/measurement.md).
#include "cupti_trace.h"

#include <cupti.h>
#include <cxxabi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "chrome_trace.h"

namespace ac::cudnn {
namespace {

// The newest record layouts of the header compiled against (CUPTI fills the newest its library knows; each
// version appends fields, so the ones read here are where every version has them).
#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
#else
using KernelRecord = CUpti_ActivityKernel9;
using MemcpyRecord = CUpti_ActivityMemcpy5;
#endif
using MemsetRecord = CUpti_ActivityMemset4;

constexpr size_t kBufferBytes = 8u << 20;  // CUPTI's advice: 1 to 10 MB
constexpr size_t kBufferAlign = 8;

// The profiled pass's events while a pass runs (null otherwise: late records are dropped), and how many records
// CUPTI dropped in it.
std::mutex sink_mutex;
std::vector<trace::Event>* sink = nullptr;
size_t dropped_records = 0;

std::string result_name(CUptiResult r) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || s == nullptr) return "CUPTI error " + std::to_string(r);
  return s;
}

std::string demangled(const char* name) {
  if (name == nullptr) return "(unnamed kernel)";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

std::string callback_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const char* name = nullptr;
  if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr)
    return "cbid " + std::to_string(cbid);
  return trace::api_name(name);
}

const char* memory_kind(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return "Array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return "Managed";
    default: return "Unknown";
  }
}

const char* copy_kind(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "other";
  }
}

int64_t ns(uint64_t t) { return static_cast<int64_t>(t); }

// One record as an event; false for kinds the trace has no use for.
bool convert(const CUpti_Activity* record, trace::Event& e) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const KernelRecord*>(record);
      e = {"kernel", demangled(k->name), ns(k->start), ns(k->end), k->deviceId, k->streamId,
           {{"device", k->deviceId}, {"stream", k->streamId}, {"correlation", k->correlationId},
            {"graph id", k->graphId}, {"grid x", k->gridX}, {"grid y", k->gridY}, {"grid z", k->gridZ},
            {"block x", k->blockX}, {"block y", k->blockY}, {"block z", k->blockZ}}};
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const MemcpyRecord*>(record);
      e = {"gpu_memcpy",
           std::string("Memcpy ") + copy_kind(m->copyKind) + " (" + memory_kind(m->srcKind) + " -> " +
               memory_kind(m->dstKind) + ")",
           ns(m->start), ns(m->end), m->deviceId, m->streamId,
           {{"device", m->deviceId}, {"stream", m->streamId}, {"correlation", m->correlationId},
            {"bytes", static_cast<int64_t>(m->bytes)}}};
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const MemsetRecord*>(record);
      e = {"gpu_memset", std::string("Memset (") + memory_kind(static_cast<uint8_t>(m->memoryKind)) + ")",
           ns(m->start), ns(m->end), m->deviceId, m->streamId,
           {{"device", m->deviceId}, {"stream", m->streamId}, {"correlation", m->correlationId},
            {"bytes", static_cast<int64_t>(m->bytes)}}};
      return true;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const bool runtime = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
      e = {runtime ? "cuda_runtime" : "cuda_driver",
           callback_name(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid),
           ns(a->start), ns(a->end), a->processId, a->threadId,
           {{"cbid", a->cbid}, {"correlation", a->correlationId}}};
      return true;
    }
    default:
      return false;
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer == nullptr ? 0 : kBufferBytes;  // 0: CUPTI drops records, and says how many
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  std::vector<trace::Event> events;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    trace::Event e;
    if (convert(record, e)) events.push_back(std::move(e));
  }
  std::free(buffer);
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(context, stream, &dropped);
  const std::lock_guard<std::mutex> lock(sink_mutex);
  if (sink == nullptr) return;
  sink->insert(sink->end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
  dropped_records += dropped;
}

struct Kind {
  CUpti_ActivityKind kind;
  const char* name;
};
constexpr Kind kKinds[] = {{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"},
                           {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"},
                           {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET"},
                           {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME"},
                           {CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER"}};

// Switches the kinds off and hands every record CUPTI holds to buffer_completed; the pass's events are then all in
// the sink.
void stop(size_t enabled) {
  for (size_t i = 0; i < enabled; ++i) cuptiActivityDisable(kKinds[i].kind);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

}  // namespace

std::string cupti_trace(const std::function<void()>& loop, const std::string& path) {
  static const CUptiResult registered = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (registered != CUPTI_SUCCESS)
    return "CUPTI: cuptiActivityRegisterCallbacks failed: " + result_name(registered) + "; device columns null";
  std::vector<trace::Event> events;
  {
    const std::lock_guard<std::mutex> lock(sink_mutex);
    sink = &events;
    dropped_records = 0;
  }
  const auto detach = [] {
    const std::lock_guard<std::mutex> lock(sink_mutex);
    sink = nullptr;
  };
  size_t enabled = 0;
  for (const Kind& k : kKinds) {
    const CUptiResult r = cuptiActivityEnable(k.kind);
    if (r != CUPTI_SUCCESS) {
      stop(enabled);
      detach();
      return std::string("CUPTI: cuptiActivityEnable(") + k.name + ") failed: " + result_name(r) +
             "; device columns null";
    }
    ++enabled;
  }
  uint64_t base = 0;
  cuptiGetTimestamp(&base);
  try {
    loop();
  } catch (...) {
    stop(enabled);
    detach();
    throw;
  }
  stop(enabled);
  size_t dropped = 0;
  {
    const std::lock_guard<std::mutex> lock(sink_mutex);
    sink = nullptr;
    dropped = dropped_records;
  }
  if (dropped > 0)
    return "CUPTI dropped " + std::to_string(dropped) + " activity records (buffers full): device columns null";
  const bool any_kernel = std::any_of(events.begin(), events.end(), [](const trace::Event& e) {
    return e.cat == "kernel";
  });
  if (!any_kernel)
    return "CUPTI recorded no kernel in the profiled loop (activity tracing unavailable to this process): device "
           "columns null";
  trace::write_chrome_trace(path, std::move(events), static_cast<int64_t>(base), kCuptiSource);
  return "";
}

}  // namespace ac::cudnn
