// What train and eval share: the device and numerics settings (as measure/device.py sets them in Python), the
// normalisation of uint8 batches on the device (as study_a/eager.py's Normaliser), allocator peaks, and the
// records that open and close a phase.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.h"
#include "jsonl.h"
#include "timer.h"

#ifdef AC_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ac {

struct Session {
  torch::Device device = torch::kCPU;

  bool cuda() const { return device.is_cuda(); }

  // The stream torch runs this thread's work on, for the CUDA-event timer.
  void* stream() const {
#ifdef AC_WITH_CUDA
    if (cuda()) return c10::cuda::getCurrentCUDAStream(device.index()).stream();
#endif
    return nullptr;
  }

  void synchronize() const {
#ifdef AC_WITH_CUDA
    if (cuda()) c10::cuda::getCurrentCUDAStream(device.index()).synchronize();
#endif
  }

  void reset_alloc_peak() const {
#ifdef AC_WITH_CUDA
    if (cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
  }

  // The caching allocator's count of allocations it could not satisfy ("num_ooms"); 0 off the GPU.
  int64_t oom_count() const {
#ifdef AC_WITH_CUDA
    if (cuda()) return c10::cuda::CUDACachingAllocator::getDeviceStats(device.index()).num_ooms;
#endif
    return 0;
  }

  // torch.cuda.max_memory_allocated in MiB ("allocated_bytes.all.peak"); none off the GPU.
  std::optional<double> alloc_peak_mib() const {
#ifdef AC_WITH_CUDA
    if (cuda()) {
      const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
      return static_cast<double>(stats.allocated_bytes[0].peak) / (1024.0 * 1024.0);
    }
#endif
    return std::nullopt;
  }
};

// --device cpu|cuda|cuda:N, --tf32 0|1, --cudnn-benchmark 0|1: the settings every compared run shares.
inline Session open_session(const Args& args) {
  Session s;
  s.device = torch::Device(args.str("device"));
  if (s.cuda()) {
    if (!torch::cuda::is_available())
      throw std::runtime_error("--device " + args.str("device") + " but this process sees no CUDA GPU");
    if (!s.device.has_index()) s.device = torch::Device(torch::kCUDA, 0);
  } else if (!s.device.is_cpu()) {
    throw std::runtime_error("--device " + args.str("device") + ": expected cpu, cuda or cuda:N");
  }
  const bool tf32 = args.boolean("tf32");
  auto& ctx = at::globalContext();
  ctx.setAllowTF32CuBLAS(tf32);
  ctx.setAllowTF32CuDNN(tf32);
  ctx.setFloat32MatmulPrecision(tf32 ? "high" : "highest");
  ctx.setBenchmarkCuDNN(args.boolean("cudnn-benchmark"));
  return s;
}

// uint8 N×C×H×W on the host -> float32 on the device: x / 255, minus mean, over std (per channel), in the same
// operations as study_a/eager.py so that the floats are the same.
class Normaliser {
 public:
  Normaliser(const std::vector<double>& mean, const std::vector<double>& std, int64_t channels,
             torch::Device device) {
    if (static_cast<int64_t>(mean.size()) != channels || static_cast<int64_t>(std.size()) != channels)
      throw std::runtime_error("--mean/--std: need " + std::to_string(channels) + " values each, got " +
                               std::to_string(mean.size()) + " and " + std::to_string(std.size()));
    auto as_tensor = [&](const std::vector<double>& v) {
      return torch::tensor(std::vector<float>(v.begin(), v.end())).view({1, channels, 1, 1}).to(device);
    };
    mean_ = as_tensor(mean);
    std_ = as_tensor(std);
    device_ = device;
  }

  torch::Tensor operator()(const torch::Tensor& images_u8) const {
    torch::Tensor x = images_u8.to(device_);
    return (x.to(torch::kFloat32).div_(255.0) - mean_) / std_;
  }

 private:
  torch::Tensor mean_, std_;
  torch::Device device_ = torch::kCPU;
};

// A phase on the CLOCK_MONOTONIC timeline the launcher's NVML sampler uses, with the allocator peak inside it.
struct Phase {
  const Session& session;
  double start_s = 0, end_s = 0;

  explicit Phase(const Session& s) : session(s) {
    session.reset_alloc_peak();
    start_s = monotonic_s();
  }

  // Waits for the device, then closes the phase.
  void finish() {
    session.synchronize();
    end_s = monotonic_s();
  }

  void describe(Record& r) const {
    r.add("start_monotonic_s", start_s).add("end_monotonic_s", end_s).add("wall_s", end_s - start_s)
        .add("alloc_peak_mib", session.alloc_peak_mib());
  }
};

// The first record of every run: what the program runs on, and the time now on CLOCK_MONOTONIC (the launcher
// checks it lies between its own time.monotonic() readings before and after the launch).
inline void emit_start(const Session& s, const std::string& subcommand) {
  Record r("start");
  r.add("subcommand", subcommand).add("monotonic_s", monotonic_s()).add("device", s.device.str())
      .add("torch_version", std::string(TORCH_VERSION))
      .add("intra_op_threads", static_cast<int64_t>(at::get_num_threads()))
      // what the process runs under, read back from ATen (not the flag), so a caller can check its numerics
      .add("tf32_cudnn", at::globalContext().allowTF32CuDNN())
      .add("tf32_matmul", at::globalContext().allowTF32CuBLAS());
  r.emit();
}

}  // namespace ac
