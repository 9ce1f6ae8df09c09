// The GPU and what every layer shares: the stream, the cuDNN and cuBLAS handles (both bound to the stream), the
// numerics and convolution-algorithm settings, one growing convolution workspace, tensor descriptors by shape,
// and device buffers whose bytes are counted (alloc_peak_mib, like torch.cuda.max_memory_allocated).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "check.h"

namespace ac::cudnn {

// No usable GPU: the same words as ac_libtorch's error, so the launcher and tests read one message.
class NoGpu : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bytes held by Buffers now and at most since the last reset_peak().
struct DeviceBytes {
  static inline size_t live = 0, peak = 0;
  static void reset_peak() { peak = live; }
  static double peak_mib() { return static_cast<double>(peak) / (1024.0 * 1024.0); }
};

// An owned device array of T; `what` names it in an out-of-memory error.
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(size_t count, const std::string& what) : count_(count) {
    if (count == 0) return;
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, count * sizeof(T));
    if (err != cudaSuccess) {
      cudaGetLastError();
      const std::string size = std::to_string((count * sizeof(T) + (1 << 20) - 1) >> 20) + " MiB";
      if (err == cudaErrorMemoryAllocation)
        throw OutOfMemory(what + ": cudaMalloc of " + size + " failed: out of device memory (" +
                          std::to_string(DeviceBytes::live >> 20) + " MiB already held by this program)");
      throw GpuError(what + ": cudaMalloc of " + size + ": " + cudaGetErrorString(err));
    }
    ptr_ = static_cast<T*>(p);
    DeviceBytes::live += bytes();
    if (DeviceBytes::live > DeviceBytes::peak) DeviceBytes::peak = DeviceBytes::live;
  }
  Buffer(Buffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { release(); }

  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  void release() {
    if (!ptr_) return;
    cudaFree(ptr_);
    DeviceBytes::live -= bytes();
    ptr_ = nullptr;
  }
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

// NCHW, fully packed, float32.
struct Shape {
  int n = 0, c = 0, h = 0, w = 0;
  int64_t per_sample() const { return int64_t{c} * h * w; }
  int64_t numel() const { return n * per_sample(); }
  bool operator<(const Shape& o) const { return std::tie(n, c, h, w) < std::tie(o.n, o.c, o.h, o.w); }
  bool operator==(const Shape& o) const { return std::tie(n, c, h, w) == std::tie(o.n, o.c, o.h, o.w); }
  std::string str() const {
    return std::to_string(n) + "×" + std::to_string(c) + "×" + std::to_string(h) + "×" + std::to_string(w);
  }
};

// How convolution algorithms are chosen: `heuristic` (cudnnGetConvolution*Algorithm_v7, the first that fits the
// workspace limit: torch's choice with cudnn.benchmark off) or `find` (cudnnFindConvolution*Algorithm, measured
// once per shape: cudnn.benchmark on).
struct ConvSettings {
  bool find = false;
  size_t workspace_limit_bytes = size_t{1024} << 20;
  bool tf32 = false;  // false: CUDNN_FMA_MATH and CUBLAS_DEFAULT_MATH, no TF32 anywhere

  std::string algo_name() const { return find ? "find" : "heuristic"; }
};

class Gpu {
 public:
  // device: "cuda" or "cuda:N"; anything else, or no visible GPU, is a clear error.
  Gpu(const std::string& device, ConvSettings settings);
  ~Gpu();
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;

  cudaStream_t stream() const { return stream_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  const ConvSettings& settings() const { return settings_; }
  int device_index() const { return index_; }
  std::string device_name() const { return "cuda:" + std::to_string(index_); }

  // At least `bytes` of convolution workspace (grown, never shrunk; outside CUDA-graph capture only).
  void* workspace(size_t bytes, const std::string& layer);
  double workspace_mib() const { return static_cast<double>(workspace_.bytes()) / (1024.0 * 1024.0); }
  // Frees the workspace (a sweep between cells, so that each cell's memory is its own); the next layer grows it.
  void free_workspace();
  // Counts workspace reallocations: a CUDA graph captured before one points at freed memory and is remade.
  uint64_t workspace_generation() const { return workspace_generation_; }

  // A packed NCHW float descriptor for `shape`, made once and kept.
  cudnnTensorDescriptor_t tensor(const Shape& shape);

  void synchronize(const std::string& where) const { CUDA_CHECK(cudaStreamSynchronize(stream_), where); }

 private:
  int index_ = 0;
  ConvSettings settings_;
  cudaStream_t stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  Buffer<char> workspace_;
  uint64_t workspace_generation_ = 0;
  Buffer<char> cublas_workspace_;  // set explicitly, so that cuBLAS never allocates (inside graph capture)
  std::map<Shape, cudnnTensorDescriptor_t> tensors_;
};

}  // namespace ac::cudnn
