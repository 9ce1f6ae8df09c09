// ac_cudnn's device profiler for the sweep's profiled pass (native/common/sweep_serve.h `profile N`): CUPTI's
// activity API, the API that Kineto (torch.profiler, LibTorch's profiler) stands on, subscribed to directly since
// the program links no framework. Built where CMake finds CUPTI (AC_WITH_CUPTI, native/cudnn/CMakeLists.txt);
// without it trace_device keeps sweep.h's "no CUPTI activity subscriber is linked in".
#pragma once

#include <functional>
#include <string>

namespace ac::cudnn {

// device_source of the profile record (the row's column), as "LibTorch profiler (Kineto/CUPTI)" is ac_libtorch's.
inline constexpr const char* kCuptiSource = "CUPTI activity API (ac_cudnn)";

// Runs `loop` with CUPTI recording kernels (CONCURRENT_KERNEL: every kernel, those of a CUDA graph replay too),
// copies, memsets and the runtime's and driver's API calls (the launch calls), flushes CUPTI's buffers after it and
// writes the records as a Chrome trace to `path` (native/common/chrome_trace.h: what measure/profiled.py reads).
// Returns "" when written; else why there is no device time (CUPTI refused, e.g. CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
// it recorded no kernel or dropped records), with nothing written: the row's device columns are null with that
// message and the cell stands. An exception from `loop` propagates after CUPTI is switched off again.
std::string cupti_trace(const std::function<void()>& loop, const std::string& path);

}  // namespace ac::cudnn
