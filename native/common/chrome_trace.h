// A device profiler's records as the Chrome trace that src/abstraction_cost/measure/profiled.py reads (the shape
// torch.profiler and LibTorch's Kineto profiler export), for a C++ program whose profiler is not Kineto (ac_cudnn's
// CUPTI activity subscriber, native/cudnn/cupti_trace.cpp). Framework-free and CUPTI-free, so that the conversion
// is tested on any machine (examples/chrome_trace_check.cpp, tests/study_a/test_cupti_trace.py).
//
// What profiled.device_summary reads, and so what is written (every event a complete event, "ph":"X"):
//   "cat":"kernel"                    a kernel the device ran (one per kernel, also each kernel of a CUDA graph
//                                     replay): "ts" and "dur" in µs; their durations summed are device_ms
//   "cat":"gpu_memcpy" / "gpu_memset" copies and memsets (memcpy_ms, and the device's busy time with the kernels)
//   "cat":"cuda_runtime" / "cuda_driver"  the host's API calls; those named in profiled.LAUNCH_CALLS are the launch
//                                     calls (cudaLaunchKernel, CUDA 13's __cudaLaunchKernel behind <<<...>>>,
//                                     cuLaunchKernel, cudaGraphLaunch: a graph replay is one), and their span is
//                                     the window device records must fall in
// API names are CUPTI's callback names without their version suffix ("cudaLaunchKernel_v7000" ->
// "cudaLaunchKernel"), as Kineto writes them. Driver calls are kept only where they launch (as Kineto keeps only
// cuLaunchKernel among driver calls) and not inside a runtime call of the same thread (the runtime's own launch
// through the driver, were it reported, is the same launch). Timestamps are CUPTI's nanoseconds; "ts" is written
// relative to `base_ns` (the trace's "baseTimeNanoseconds", as Kineto's traces), in µs with ns precision, so that
// a double holds it exactly.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "jsonl.h"

namespace ac::trace {

struct Event {
  std::string cat;   // kernel, gpu_memcpy, gpu_memset, cuda_runtime, cuda_driver
  std::string name;
  int64_t start_ns = 0, end_ns = 0;
  int64_t pid = 0, tid = 0;  // device and stream for device records; process and thread for API calls
  std::vector<std::pair<std::string, int64_t>> args;  // e.g. correlation, stream, graph id, bytes
};

// Launch calls as profiled.LAUNCH_CALLS names them (the driver's among them are the ones kept).
inline bool is_launch(const std::string& name) {
  static const char* const kLaunches[] = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                                          "cuLaunchKernelEx", "cudaLaunchCooperativeKernel", "cudaGraphLaunch",
                                          "cuGraphLaunch", "__cudaLaunchKernel"};
  return std::find(std::begin(kLaunches), std::end(kLaunches), name) != std::end(kLaunches);
}

// A CUPTI callback name without its ABI suffixes: "cudaLaunchKernel_v7000" -> "cudaLaunchKernel",
// "cuLaunchKernel_ptsz" -> "cuLaunchKernel", "cudaGraphLaunch_v10000_ptsz" -> "cudaGraphLaunch".
inline std::string api_name(std::string name) {
  while (true) {
    const size_t cut = name.rfind('_');
    if (cut == std::string::npos || cut == 0) return name;
    const std::string tail = name.substr(cut + 1);
    const bool version = tail.size() > 1 && tail[0] == 'v' &&
                         std::all_of(tail.begin() + 1, tail.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!version && tail != "ptsz" && tail != "ptds") return name;
    name.resize(cut);
  }
}

// The events a trace keeps (see the header): every device record and runtime call; a driver call only where it
// launches and no runtime call of its thread encloses it.
inline std::vector<Event> kept(std::vector<Event> events) {
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> runtime;  // thread -> its runtime calls' spans
  for (const Event& e : events)
    if (e.cat == "cuda_runtime") runtime[e.tid].emplace_back(e.start_ns, e.end_ns);
  std::vector<Event> out;
  out.reserve(events.size());
  for (Event& e : events) {
    if (e.cat == "cuda_driver") {
      if (!is_launch(e.name)) continue;
      const auto& spans = runtime[e.tid];
      const bool nested = std::any_of(spans.begin(), spans.end(), [&](const std::pair<int64_t, int64_t>& s) {
        return s.first <= e.start_ns && e.end_ns <= s.second;
      });
      if (nested) continue;
    }
    out.push_back(std::move(e));
  }
  std::stable_sort(out.begin(), out.end(), [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
  return out;
}

// ns relative to base as µs with three decimals ("12.345"), exact for any span a profiled pass can have.
inline std::string micros(int64_t ns, int64_t base_ns) {
  const int64_t d = ns - base_ns;
  const int64_t whole = d / 1000, frac = d % 1000;
  char buf[48];
  if (d < 0 && whole == 0) {
    std::snprintf(buf, sizeof buf, "-0.%03lld", static_cast<long long>(-frac));
  } else {
    std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(whole),
                  static_cast<long long>(frac < 0 ? -frac : frac));
  }
  return buf;
}

inline std::string event_json(const Event& e, int64_t base_ns) {
  std::string s = "{\"ph\":\"X\",\"cat\":" + Record::quote(e.cat) + ",\"name\":" + Record::quote(e.name) +
                  ",\"pid\":" + std::to_string(e.pid) + ",\"tid\":" + std::to_string(e.tid) +
                  ",\"ts\":" + micros(e.start_ns, base_ns) +
                  ",\"dur\":" + micros(std::max(e.end_ns, e.start_ns) - e.start_ns, 0) + ",\"args\":{";
  for (size_t i = 0; i < e.args.size(); ++i)
    s += (i ? "," : "") + Record::quote(e.args[i].first) + ":" + std::to_string(e.args[i].second);
  return s + "}}";
}

// The trace's JSON text: {"schemaVersion":1,"baseTimeNanoseconds":base,"traceName":source,"traceEvents":[...]}.
inline std::string chrome_trace(const std::vector<Event>& events, int64_t base_ns, const std::string& source) {
  std::string s = "{\"schemaVersion\":1,\"baseTimeNanoseconds\":" + std::to_string(base_ns) +
                  ",\"traceName\":" + Record::quote(source) + ",\"traceEvents\":[";
  for (size_t i = 0; i < events.size(); ++i) s += (i ? ",\n" : "\n") + event_json(events[i], base_ns);
  return s + "\n]}\n";
}

// Writes chrome_trace(kept(events)) to `path`; throws std::runtime_error naming the path when it cannot.
inline void write_chrome_trace(const std::string& path, std::vector<Event> events, int64_t base_ns,
                               const std::string& source) {
  const std::string text = chrome_trace(kept(std::move(events)), base_ns, source);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("could not write the trace " + path);
}

}  // namespace ac::trace
