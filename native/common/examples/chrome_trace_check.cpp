// chrome_trace.h on any machine (tests/study_a/test_cupti_trace.py): the records ac_cudnn's CUPTI subscriber
// (native/cudnn/cupti_trace.cpp) turns into trace events, made up here for a profiled loop of two calls, written as
// the trace measure/profiled.py reads.
//   g++ -std=c++20 -I native/common native/common/examples/chrome_trace_check.cpp -o chrome_trace_check
//   chrome_trace_check eager PATH    cudnn: per call a pageable copy, a memset and four kernels, three launched by
//                                    the runtime (__cudaLaunchKernel, CUDA 13's <<<...>>>, and cudaLaunchKernel,
//                                    one of them also reported as the driver's cuLaunchKernel inside it) and one
//                                    by cuLaunchKernel alone (cuDNN's runtime-compiled kernels), plus a driver call
//                                    that launches nothing
//   chrome_trace_check graphs PATH   cudnn-graphs: per call the copy, then one cudaGraphLaunch whose four kernels
//                                    CUPTI reports one by one (CONCURRENT_KERNEL)
//   chrome_trace_check names NAME... each CUPTI callback name as api_name() writes it, one per line
// Timestamps are CUPTI's nanoseconds of today's order (1.7e18), where a double in µs would lose the nanoseconds.
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "chrome_trace.h"

namespace {

using ac::trace::Event;
constexpr int64_t kBase = 1'700'000'000'123'456'789;
constexpr int64_t kPid = 4242, kHostThread = 7, kDevice = 0, kStream = 13;

Event api(const std::string& cat, const std::string& cupti_name, int64_t start, int64_t end, int64_t correlation) {
  return {cat, ac::trace::api_name(cupti_name), kBase + start, kBase + end, kPid, kHostThread,
          {{"correlation", correlation}}};
}

Event device(const std::string& cat, const std::string& name, int64_t start, int64_t end, int64_t correlation) {
  return {cat, name, kBase + start, kBase + end, kDevice, kStream, {{"correlation", correlation}}};
}

// One call starting at t (ns after the base): the copy, then the model.
void call(std::vector<Event>& out, int64_t t, bool graphs) {
  out.push_back(api("cuda_runtime", "cudaMemcpyAsync_v3020", t, t + 9'000, 1));
  out.push_back(device("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", t + 2'000, t + 8'000, 1));
  if (graphs) {
    out.push_back(api("cuda_runtime", "cudaGraphLaunch_v10000", t + 10'000, t + 14'000, 2));
    for (int k = 0; k < 4; ++k)
      out.push_back(device("kernel", "graph_kernel_" + std::to_string(k), t + 15'000 + k * 10'000,
                           t + 15'000 + k * 10'000 + 8'001, 2));
  } else {
    for (int k = 0; k < 3; ++k) {
      const int64_t at = t + 10'000 + k * 10'000;
      // ac_cudnn's own kernels: <<<...>>>, which CUDA 13 routes through __cudaLaunchKernel; cuBLAS's cudaLaunchKernel
      out.push_back(api("cuda_runtime", k == 0 ? "__cudaLaunchKernel_v13000" : "cudaLaunchKernel_v7000", at, at + 3'000,
                        10 + k));
      if (k == 1) out.push_back(api("cuda_driver", "cuLaunchKernel", at + 500, at + 2'500, 10 + k));
      out.push_back(device("kernel", "void relu<float>(float*, long)", at + 4'000, at + 4'000 + 8'001, 10 + k));
    }
    out.push_back(api("cuda_driver", "cuLaunchKernel_ptsz", t + 40'000, t + 42'000, 20));
    out.push_back(device("kernel", "cudnn_generated_conv", t + 43'000, t + 51'001, 20));
    out.push_back(api("cuda_driver", "cuCtxGetCurrent", t + 52'000, t + 52'100, 21));
  }
  out.push_back(api("cuda_runtime", "cudaMemsetAsync_v3020", t + 60'000, t + 61'000, 30));
  out.push_back(device("gpu_memset", "Memset (Device)", t + 61'500, t + 62'500, 30));
  out.push_back(api("cuda_runtime", "cudaStreamSynchronize_v3020", t + 61'000, t + 63'000, 31));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  if (mode == "names") {
    for (int i = 2; i < argc; ++i) std::cout << ac::trace::api_name(argv[i]) << '\n';
    return 0;
  }
  if (argc != 3 || (mode != "eager" && mode != "graphs")) return 2;
  std::vector<Event> events;
  // CUPTI hands buffers back in no particular order: the second call's records first
  call(events, 100'000, mode == "graphs");
  call(events, 0, mode == "graphs");
  ac::trace::write_chrome_trace(argv[2], events, kBase, "CUPTI activity API (ac_cudnn)");
  return 0;
}
