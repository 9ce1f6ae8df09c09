// ac_libtorch sweep: Study A's inference sweep of one model (libtorch, torchscript or aoti: models.h) over
// resolution × batch × input transfer mode, driven by native/common/sweep.h (flags, walk order, timing,
// streamed records, oom handling, fault hook).
//   --inputs DIR --pool P   DIR/res<R>.u8 holds P images at resolution R (uint8, P × --channels × R × R), resized
//                           once per resolution by the launcher; a batch of B is those images repeated in order
//   --mean/--std            per-channel normalisation: on the host for float32 transfers (before timing, as the
//                           study's PyTorch data loader did), on the device for uint8-pinned
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "host_memory.h"
#include "models.h"
#include "prepared.h"
#include "programs.h"
#include "runtime.h"
#include "sweep_serve.h"

#ifdef AC_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace ac {
namespace {

// A pageable host tensor on pageable_alloc's huge pages (torch's CPU allocator would not advise them).
torch::Tensor pageable(at::IntArrayRef sizes, at::ScalarType dtype) {
  const auto bytes = static_cast<std::size_t>(c10::multiply_integers(sizes)) * c10::elementSize(dtype);
  void* data = pageable_alloc(bytes);
  if (!data) throw c10::OutOfMemoryError({__func__, __FILE__, __LINE__}, "allocating the host batch failed");
  return torch::from_blob(data, sizes, [](void* p) { std::free(p); }, torch::TensorOptions().dtype(dtype));
}

class TorchSweep : public SweepBackend {
 public:
  TorchSweep(const Session& s, Forward forward, std::string inputs, int64_t pool, int64_t channels,
             const std::vector<double>& mean, const std::vector<double>& std)
      : s_(s), forward_(std::move(forward)), inputs_(std::move(inputs)), pool_(pool), channels_(channels) {
    auto as_tensor = [&](const std::vector<double>& v) {
      return torch::tensor(std::vector<float>(v.begin(), v.end())).view({1, channels, 1, 1});
    };
    mean_host_ = as_tensor(mean);
    std_host_ = as_tensor(std);
    mean_dev_ = mean_host_.to(s.device);
    std_dev_ = std_host_.to(s.device);
  }

  // Cold: the first cell since release() (the caching allocator returned its blocks, so the shape's allocations
  // and cuDNN's algorithm choice are new), or the process's first uint8-pinned cell (its normalisation's first run).
  bool prepare(const SweepCell& cell) override {
    guard([&] {
      uint8_ = cell.transfer == "uint8-pinned";
      device_input_ = torch::zeros({cell.batch, channels_, cell.resolution, cell.resolution},
                                   torch::TensorOptions(s_.device).dtype(uint8_ ? torch::kUInt8 : torch::kFloat32));
    });
    const bool cold = !held_ || (uint8_ && !uint8_ran_);
    held_ = true;
    return cold;
  }

  void load_input(const SweepCell& cell) override {
    guard([&] {
      const torch::Tensor images = pool_images(cell.resolution);
      // Pinning needs a CUDA host allocator; on the CPU every mode copies from ordinary memory.
      const bool pin = cell.transfer != "float32-pageable" && s_.cuda();
      // The batch is written into its final (pinned) buffer in place: at batch 128, 1024 px a float32 batch is
      // 1.6 GB, and every temporary of (x / 255 - mean) / std or a pin_memory() copy is another pass over it.
      host_ = pin ? torch::empty(device_input_.sizes(),
                                 torch::TensorOptions().dtype(device_input_.dtype()).pinned_memory(true))
                  : pageable(device_input_.sizes(), device_input_.scalar_type());
      for (int64_t start = 0; start < cell.batch; start += pool_) {
        const int64_t n = std::min(pool_, cell.batch - start);
        host_.narrow(0, start, n).copy_(images.narrow(0, 0, n));  // uint8 -> float32 for the float modes
      }
      if (!uint8_) host_.div_(255.0).sub_(mean_host_).div_(std_host_);
      pinned_ = host_.is_pinned();
    });
  }

  void copy_input() override {
    guard([&] { device_input_.copy_(host_, /*non_blocking=*/pinned_); });
  }

  void forward() override {
    guard([&] {
      torch::NoGradGuard no_grad;
      torch::Tensor x = uint8_ ? (device_input_.to(torch::kFloat32).div_(255.0) - mean_dev_) / std_dev_
                               : device_input_;
      logits_ = forward_(x);
    });
  }

  // LibTorch's own Kineto profiler (CUPTI's activity API underneath, as torch.profiler in the Python workers), so
  // that every implementation's device columns come from one profiler; CPU activity alone without CUDA.
  std::string trace_device(const std::function<void()>& loop, const std::string& path) override {
    namespace ap = torch::autograd::profiler;
    namespace tp = torch::profiler::impl;
    std::set<tp::ActivityType> activities{tp::ActivityType::CPU};
    if (s_.cuda()) activities.insert(tp::ActivityType::CUDA);
    const tp::ProfilerConfig config(tp::ProfilerState::KINETO);
    ap::prepareProfiler(config, activities);
    ap::enableProfiler(config, activities);
    try {
      loop();
    } catch (...) {
      ap::disableProfiler();
      throw;
    }
    ap::disableProfiler()->save(path);
    return "";
  }

  // The cell's tensors go back to the caching allocator, which keeps their blocks for the shape's next mode.
  void end_cell() noexcept override {
    host_ = device_input_ = logits_ = torch::Tensor();
    uint8_ran_ = uint8_ran_ || uint8_;
  }

  void release() noexcept override {
    host_ = device_input_ = logits_ = torch::Tensor();
    held_ = false;
#ifdef AC_WITH_CUDA
    if (s_.cuda()) {
      try {
        s_.synchronize();
      } catch (...) {
      }
      c10::cuda::CUDACachingAllocator::emptyCache();
    }
#endif
  }

  int64_t input_bytes() const override { return host_.defined() ? host_.numel() * host_.element_size() : 0; }
  bool cuda() const override { return s_.cuda(); }
  void* stream() const override { return s_.stream(); }
  void synchronize() const override { s_.synchronize(); }
  void reset_alloc_peak() const override { s_.reset_alloc_peak(); }
  std::optional<double> alloc_peak_mib() const override { return s_.alloc_peak_mib(); }
  std::vector<float> logits() const override {
    if (!logits_.defined()) return {};
    const torch::Tensor host = logits_.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    return {host.data_ptr<float>(), host.data_ptr<float>() + host.numel()};
  }

 private:
  // torch's out-of-memory error becomes the sweep's oom, with torch's own message. Inside a TorchScript module or
  // an AOTInductor package it reaches here as another error (the interpreter's, or the package runner's "API
  // call failed", with torch's message only on stderr); the caching allocator's oom count tells it apart.
  template <typename F>
  void guard(F&& f) const {
    const int64_t ooms = s_.oom_count();
    try {
      f();
    } catch (const c10::OutOfMemoryError& e) {
      throw SweepOom(e.what_without_backtrace());
    } catch (const std::exception& e) {
      if (s_.oom_count() <= ooms) throw;
      const std::string what = e.what();
      const size_t found = what.find("CUDA out of memory");  // the allocator's own line, where the error carries it
      if (found != std::string::npos) throw SweepOom(what.substr(found, what.find('\n', found) - found));
      throw SweepOom("CUDA out of memory inside the model (the caching allocator's oom count rose): " +
                     what.substr(0, what.find('\n')));
    }
  }

  torch::Tensor pool_images(int64_t resolution) {
    auto it = pools_.find(resolution);
    if (it != pools_.end()) return it->second;
    const std::string path = inputs_ + "/res" + std::to_string(resolution) + ".u8";
    auto bytes = std::make_shared<std::vector<uint8_t>>(
        read_exact<uint8_t>(path, pool_ * channels_ * resolution * resolution));
    torch::Tensor t = torch::from_blob(bytes->data(), {pool_, channels_, resolution, resolution},
                                       [bytes](void*) {}, torch::kUInt8);
    pools_.clear();  // resolutions ascend: the previous one is not needed again
    return pools_[resolution] = t;
  }

  const Session& s_;
  Forward forward_;
  std::string inputs_;
  int64_t pool_, channels_;
  torch::Tensor mean_host_, std_host_, mean_dev_, std_dev_;
  std::map<int64_t, torch::Tensor> pools_;
  torch::Tensor host_, device_input_, logits_;
  bool uint8_ = false, pinned_ = false;
  bool held_ = false, uint8_ran_ = false;  // a shape's state is held (since prepare); a uint8 cell has run
};

}  // namespace

int sweep_main(const Args& a) {
  const Session session = open_session(a);
  const std::string kind = a.str("model");
  const int64_t channels = a.integer("channels"), pool = a.integer("pool");
  if (pool < 1) throw ArgError("--pool must be >= 1");
  const SweepSettings settings = read_sweep_settings(a);
  const std::string inputs = a.str("inputs");
  const std::vector<double> mean = a.numbers("mean"), std = a.numbers("std");
  if (static_cast<int64_t>(mean.size()) != channels || static_cast<int64_t>(std.size()) != channels)
    throw ArgError("--mean/--std: need " + std::to_string(channels) + " values each");
  const double load_start = monotonic_s();
  std::shared_ptr<void> keep;
  Forward forward = load_model(kind, a, session, channels, keep);
  const double load_s = monotonic_s() - load_start;
  a.reject_unused();
  emit_start(session, "sweep");
  Record("loaded").add("model", kind).add("load_s", load_s).emit();
  TorchSweep backend(session, std::move(forward), inputs, pool, channels, mean, std);
  if (settings.serve) {
    run_sweep_served(backend, settings);
  } else {
    run_sweep(backend, settings);
  }
  return 0;
}

}  // namespace ac
