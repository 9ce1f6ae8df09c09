// ac_cudnn sweep: Study A's inference sweep of the hand-written ResNet-50 over resolution × batch × input
// transfer mode, driven by native/common/sweep.h (flags, walk order, timing, streamed records, oom handling, fault
// hook), as ac_libtorch sweep is (native/libtorch/sweep.cpp; the same inputs and flags).
//   --model cudnn          each call runs layer by layer
//   --model cudnn-graphs   normalisation and forward captured as a CUDA graph per shape and path (float32 input,
//                          or uint8 normalised on the device; in prepare, untimed: one direct call chooses
//                          algorithms and grows the workspace, the second is captured); the host-to-device copy
//                          stays outside the graph
//   --inputs DIR --pool P  DIR/res<R>.u8 holds P images at resolution R (uint8, P × --channels × R × R), resized
//                          once per resolution by the launcher; a batch of B is those images repeated in order
//   --mean/--std           per-channel normalisation: on the host for float32 transfers (before timing, as the
//                          study's PyTorch data loader did), on the device for uint8-pinned (normalise_u8)
//   --weights FILE --classes N --device cuda[:N] --tf32 0|1 --conv-algo heuristic|find --workspace-limit-mib N
// A shape's first cell makes the float32 device input and the network's activations for batch × R × R; its modes
// share them, the workspace and the float path's graph (prepare() adds a uint8 cell's device batch and graph);
// load_input() makes the host input while the warm-up runs (float32 pageable: pageable_alloc; float32 or uint8
// pinned: cudaMallocHost; its samples written on every core, as torch's host operations are in the other
// implementations); end_cell() frees the cell's own buffers, release() everything with the workspace, so each
// cell's alloc_peak_mib is its shape's (plus the weights). An allocation failure (cudaMalloc, cudaMallocHost,
// cuDNN's own) is the cell's oom. --serve's profiled pass (`profile N`) runs its device loop under CUPTI's activity
// API (cupti_trace.h) where the build found CUPTI.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "cupti_trace.h"
#include "host_memory.h"
#include "parameters.h"
#include "prepared.h"
#include "program.h"
#include "resnet.h"
#include "sweep_serve.h"

namespace ac::cudnn {
namespace {

// f(0) .. f(n - 1) on the host's cores: a float32 batch of 512 at 1024 px is 1.6 G values to write.
template <typename F>
void for_each_sample(int64_t n, F f) {
  const int64_t workers = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::max<int64_t>(n, 1));
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < workers; ++w)
    threads.emplace_back([&f, n, w, workers] {
      for (int64_t b = w; b < n; b += workers) f(b);
    });
  for (std::thread& t : threads) t.join();
}

// Page-locked host memory (cudaMallocHost) or pageable memory (pageable_alloc: huge pages, as the other
// implementations' pageable batches), freed on destruction.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(size_t bytes, bool pinned, const std::string& what) : pinned_(pinned), bytes_(bytes) {
    if (pinned) {
      CUDA_CHECK(cudaMallocHost(&ptr_, bytes), what + " (pinned host memory)");
    } else {
      ptr_ = pageable_alloc(bytes);
      if (!ptr_) throw OutOfMemory(what + ": allocating " + std::to_string(bytes >> 20) + " MiB failed");
    }
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() {
    if (!ptr_) return;
    if (pinned_) {
      cudaFreeHost(ptr_);
    } else {
      std::free(ptr_);
    }
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  bool pinned_ = false;
  size_t bytes_ = 0;
  void* ptr_ = nullptr;
};

class CudnnSweep : public SweepBackend {
 public:
  CudnnSweep(Gpu& gpu, ResNet50& net, Normaliser& normalise, bool graphs, std::string inputs, int64_t pool,
             int channels, const std::vector<double>& mean, const std::vector<double>& std)
      : gpu_(gpu), net_(net), normalise_(normalise), graphs_(graphs), inputs_(std::move(inputs)), pool_(pool),
        channels_(channels), mean_(mean), std_(std) {}

  // Cold: the shape's first cell (its activations, workspace and algorithm choice are new), the process's first
  // uint8-pinned cell (the normalisation's first run), or a graph captured here.
  bool prepare(const SweepCell& cell) override {
    bool cold = !held_;
    guard([&] {
      uint8_ = cell.transfer == "uint8-pinned";
      const size_t count = static_cast<size_t>(cell.batch * channels_ * cell.resolution * cell.resolution);
      if (!held_) {
        n_ = static_cast<int>(cell.batch);
        resolution_ = static_cast<int>(cell.resolution);
        net_.check_batch({.inference = n_}, resolution_, resolution_);  // before anything is allocated
        x_ = Buffer<float>(count, "input batch (float)");
        CUDA_CHECK(cudaMemsetAsync(x_.get(), 0, count * sizeof(float), gpu_.stream()), "input zeroed");
        net_.reserve({.inference = n_}, resolution_, resolution_);
        held_ = true;
      }
      if (uint8_) {
        images_dev_ = Buffer<uint8_t>(count, "input batch (uint8)");
        CUDA_CHECK(cudaMemsetAsync(images_dev_.get(), 0, count, gpu_.stream()), "input zeroed");
        cold = cold || !uint8_ran_;
      }
      if (graphs_ && !replays_[uint8_]) {  // algorithms, workspace and the graph, outside the timed calls
        replays_[uint8_] = std::make_unique<GraphReplay>(true);
        forward();
        forward();
        gpu_.synchronize("graph capture");
        cold = true;
      }
    });
    return cold;
  }

  void load_input(const SweepCell& cell) override {
    guard([&] {
      const int64_t hw = int64_t{resolution_} * resolution_, image = channels_ * hw;
      const std::vector<uint8_t>& images = pool_images(cell.resolution);
      const size_t count = static_cast<size_t>(cell.batch * image);
      host_ = std::make_unique<HostBuffer>(count * (uint8_ ? 1 : sizeof(float)),
                                           cell.transfer != "float32-pageable",
                                           "input batch " + std::to_string(cell.batch) + "×" +
                                               std::to_string(channels_) + "×" + std::to_string(resolution_) +
                                               "²");
      for_each_sample(cell.batch, [&](int64_t b) {  // the pool's images repeated in order
        const uint8_t* from = images.data() + (b % pool_) * image;
        if (uint8_) {
          std::memcpy(static_cast<uint8_t*>(host_->get()) + b * image, from, image);
          return;
        }
        float* to = static_cast<float*>(host_->get()) + b * image;
        for (int c = 0; c < channels_; ++c) {  // torch's float operations: x / 255, - mean, / std
          const float m = static_cast<float>(mean_[c]), s = static_cast<float>(std_[c]);
          for (int64_t i = 0; i < hw; ++i) to[c * hw + i] = (static_cast<float>(from[c * hw + i]) / 255.0f - m) / s;
        }
      });
    });
  }

  void copy_input() override {
    guard([&] {
      void* to = uint8_ ? static_cast<void*>(images_dev_.get()) : static_cast<void*>(x_.get());
      CUDA_CHECK(cudaMemcpyAsync(to, host_->get(), host_->bytes(), cudaMemcpyHostToDevice, gpu_.stream()),
                 "input copy");
    });
  }

  void forward() override {
    guard([&] {
      const auto step = [&] {
        if (uint8_) normalise_(gpu_, images_dev_.get(), x_.get(), n_, int64_t{resolution_} * resolution_);
        logits_ = net_.forward(gpu_, x_.get(), n_, false);
      };
      if (replays_[uint8_]) {
        replays_[uint8_]->run(gpu_, n_, step);
      } else {
        step();
      }
    });
  }

  // The uint8 batch goes, and the uint8 path's graph with it (it reads that batch; a shape has one uint8 cell).
  void end_cell() noexcept override {
    cudaStreamSynchronize(gpu_.stream());
    logits_ = nullptr;
    host_.reset();
    if (uint8_) {
      replays_[1].reset();
      images_dev_ = Buffer<uint8_t>();
      uint8_ran_ = true;
    }
  }

  void release() noexcept override {
    cudaStreamSynchronize(gpu_.stream());  // an error here is the cell's already; the frees below still run
    cudaGetLastError();
    for (auto& replay : replays_) replay.reset();
    logits_ = nullptr;
    net_.release();
    x_ = Buffer<float>();
    images_dev_ = Buffer<uint8_t>();
    host_.reset();
    held_ = false;
    try {
      gpu_.free_workspace();
    } catch (const std::exception&) {
    }
  }

  // The profiled pass's device loop under CUPTI's activity API (cupti_trace.h), where the build found CUPTI.
  std::string trace_device(const std::function<void()>& loop, const std::string& path) override {
#ifdef AC_WITH_CUPTI
    return cupti_trace(loop, path);
#else
    (void)loop;
    (void)path;
    return no_device_profiler();
#endif
  }
#ifdef AC_WITH_CUPTI
  std::string device_source() const override { return kCuptiSource; }
#endif

  int64_t input_bytes() const override { return host_ ? static_cast<int64_t>(host_->bytes()) : 0; }
  bool cuda() const override { return true; }
  void* stream() const override { return gpu_.stream(); }
  void synchronize() const override { gpu_.synchronize("sweep"); }
  void reset_alloc_peak() const override { DeviceBytes::reset_peak(); }
  std::optional<double> alloc_peak_mib() const override { return DeviceBytes::peak_mib(); }
  std::vector<float> logits() const override {
    if (!logits_) return {};
    std::vector<float> host(static_cast<size_t>(n_) * net_.classes());
    CUDA_CHECK(cudaMemcpy(host.data(), logits_, host.size() * sizeof(float), cudaMemcpyDeviceToHost), "logits");
    return host;
  }

 private:
  // The program's out-of-memory error (any allocation: cudaMalloc, cudaMallocHost, cuDNN's) is the sweep's oom.
  template <typename F>
  static void guard(F&& f) {
    try {
      f();
    } catch (const OutOfMemory& e) {
      throw SweepOom(e.what());
    }
  }

  const std::vector<uint8_t>& pool_images(int64_t resolution) {
    if (pool_resolution_ != resolution) {  // resolutions ascend: the previous one is not needed again
      pool_data_.clear();
      pool_data_.shrink_to_fit();
      pool_data_ = read_exact<uint8_t>(inputs_ + "/res" + std::to_string(resolution) + ".u8",
                                       pool_ * channels_ * resolution * resolution);
      pool_resolution_ = resolution;
    }
    return pool_data_;
  }

  Gpu& gpu_;
  ResNet50& net_;
  Normaliser& normalise_;
  bool graphs_;
  std::string inputs_;
  int64_t pool_;
  int channels_;
  std::vector<double> mean_, std_;
  int64_t pool_resolution_ = -1;
  std::vector<uint8_t> pool_data_;
  int n_ = 0, resolution_ = 0;
  bool uint8_ = false;
  std::unique_ptr<HostBuffer> host_;
  Buffer<uint8_t> images_dev_;
  Buffer<float> x_;
  std::unique_ptr<GraphReplay> replays_[2];  // cudnn-graphs: the shape's float32 path [0] and uint8 path [1]
  const float* logits_ = nullptr;
  bool held_ = false, uint8_ran_ = false;  // the shape's state is held (since prepare); a uint8 cell has run
};

}  // namespace

int sweep_main(const Args& a) {
  const std::string device = a.str("device");
  const ConvSettings settings = conv_settings(a);
  const std::string model = a.str("model");
  if (model != "cudnn" && model != "cudnn-graphs")
    throw ArgError("--model: '" + model + "' is not one of cudnn, cudnn-graphs");
  const int channels = static_cast<int>(a.integer("channels")), classes = static_cast<int>(a.integer("classes"));
  const int64_t pool = a.integer("pool");
  if (pool < 1) throw ArgError("--pool must be >= 1");
  if (channels < 1 || classes < 1) throw ArgError("--channels and --classes must be at least 1");
  const SweepSettings sweep = read_sweep_settings(a);
  const std::string inputs = a.str("inputs");
  const std::vector<double> mean = a.numbers("mean"), std = a.numbers("std");
  Normaliser normalise(mean, std, channels);
  const std::string weights_path = a.str("weights");
  a.reject_unused();

  const double load_start = monotonic_s();
  const std::vector<NamedTensor> weights = read_weights(weights_path);
  LoadedNetwork loaded(weights, weights_path, channels, classes, device, settings, /*for_training=*/false,
                       normalise);
  Gpu& gpu = loaded.gpu;
  ResNet50& net = loaded.net;
  const double load_s = monotonic_s() - load_start;
  emit_start(gpu, "sweep");
  Record("loaded").add("model", model).add("load_s", load_s).emit();
  CudnnSweep backend(gpu, net, normalise, model == "cudnn-graphs", inputs, pool, channels, mean, std);
  if (sweep.serve) {
    run_sweep_served(backend, sweep);
  } else {
    run_sweep(backend, sweep);
  }
  return 0;
}

}  // namespace ac::cudnn
