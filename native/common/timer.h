// Timing of steps: CUDA events on a GPU (recorded on the given stream, read once after the phase, so timing adds
// no synchronisation), a steady clock on the CPU. Same shape as measure/timing.py's StepTimer.
//
// monotonic_s() is CLOCK_MONOTONIC, the clock of Python's time.monotonic() on Linux: the phase start and end
// the programs report land on the launcher's NVML sampler timeline without translation.
#pragma once

#include <time.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef AC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ac {

inline double monotonic_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

#ifdef AC_WITH_CUDA
inline void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}
#endif

class StepTimer {
 public:
  // stream: the cudaStream_t the timed work runs on, when cuda is true (nullptr = the legacy default stream).
  explicit StepTimer(bool cuda, void* stream = nullptr) : cuda_(cuda), stream_(stream) {
#ifndef AC_WITH_CUDA
    if (cuda_) throw std::runtime_error("StepTimer: this program was built without CUDA");
#endif
  }

  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  ~StepTimer() {
#ifdef AC_WITH_CUDA
    for (auto& [a, b] : events_) {
      cudaEventDestroy(a);
      cudaEventDestroy(b);
    }
    if (open_) cudaEventDestroy(open_);
#endif
  }

  void start() {
    if (started_) throw std::logic_error("StepTimer::start() called twice without stop()");
    started_ = true;
#ifdef AC_WITH_CUDA
    if (cuda_) {
      cuda_check(cudaEventCreate(&open_), "cudaEventCreate");
      cuda_check(cudaEventRecord(open_, static_cast<cudaStream_t>(stream_)), "cudaEventRecord");
      return;
    }
#endif
    cpu_start_ = std::chrono::steady_clock::now();
  }

  void stop() {
    if (!started_) throw std::logic_error("StepTimer::stop() without start()");
    started_ = false;
#ifdef AC_WITH_CUDA
    if (cuda_) {
      cudaEvent_t end = nullptr;
      cuda_check(cudaEventCreate(&end), "cudaEventCreate");
      cuda_check(cudaEventRecord(end, static_cast<cudaStream_t>(stream_)), "cudaEventRecord");
      events_.emplace_back(open_, end);
      open_ = nullptr;
      return;
    }
#endif
    cpu_ms_.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - cpu_start_).count());
  }

  // Per-step times in ms; on a GPU waits for the last event once.
  std::vector<double> elapsed_ms() const {
#ifdef AC_WITH_CUDA
    if (cuda_) {
      std::vector<double> out;
      if (!events_.empty()) cuda_check(cudaEventSynchronize(events_.back().second), "cudaEventSynchronize");
      for (const auto& [a, b] : events_) {
        float ms = 0;
        cuda_check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
        out.push_back(ms);
      }
      return out;
    }
#endif
    return cpu_ms_;
  }

 private:
  bool cuda_;
  void* stream_;
  bool started_ = false;
  std::chrono::steady_clock::time_point cpu_start_{};
  std::vector<double> cpu_ms_;
#ifdef AC_WITH_CUDA
  cudaEvent_t open_ = nullptr;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> events_;
#endif
};

}  // namespace ac
