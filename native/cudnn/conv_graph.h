// A forward convolution through cuDNN's graph (backend) API: an operation graph and execution plan made once per
// input shape, run with cudnnBackendExecute. The descriptor API's cudnnConvolutionForward costs tens of µs of host
// time per call under cuDNN 9, more than its kernel at small resolutions, which would leave the evaluation forward
// bound by the host; a finalised plan runs in a few µs, as torch's convolutions (cudnn-frontend) do. Backward
// convolutions stay on the descriptor API (layers.cpp).
#pragma once

#include <string>

#include "gpu.h"

namespace ac::cudnn {

// Owns one cudnnBackendDescriptor_t.
class BackendDescriptor {
 public:
  BackendDescriptor() = default;
  BackendDescriptor(cudnnBackendDescriptorType_t type, const std::string& where);
  ~BackendDescriptor();
  BackendDescriptor(BackendDescriptor&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  BackendDescriptor& operator=(BackendDescriptor&& o) noexcept;
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// The dimensions of one convolution: input shape, filter (out, in, k, k), stride and padding (square).
struct ConvGeometry {
  Shape in, out;
  int kernel, stride, padding;
};

class ConvForwardPlan {
 public:
  // The engine, as ConvSettings says: `heuristic` takes the first engine configuration of cuDNN's instant
  // heuristics (then its fallback list) that finalises and fits --workspace-limit-mib; `find` times every such
  // configuration once on x, w, y (as cudnn.benchmark does) and keeps the fastest. With TF32 off, engines noted as
  // using tensor cores (TF32 for float data) are excluded, as torch excludes them; engines that down-convert inputs
  // or reduce in lower precision are always excluded.
  ConvForwardPlan(Gpu& gpu, const ConvGeometry& g, const float* x, const float* w, float* y,
                  const std::string& layer);

  size_t workspace_bytes() const { return workspace_bytes_; }
  // cuDNN's global index of the chosen engine (stable across runs of one cuDNN version).
  int64_t engine() const { return engine_; }
  // y = conv(x, w), with `workspace` of at least workspace_bytes().
  void run(Gpu& gpu, const float* x, const float* w, float* y, void* workspace);

 private:
  std::string layer_;
  BackendDescriptor tensors_[3], conv_, op_, graph_, config_, plan_;
  size_t workspace_bytes_ = 0;
  int64_t engine_ = -1;
  // the variant pack binds device pointers to the plan's tensors; made again only when a pointer changes
  BackendDescriptor pack_;
  const void* bound_[4] = {};
};

}  // namespace ac::cudnn
