// The layers of ResNet-50 with their cuDNN / cuBLAS calls, each layer's forward beside its backward. Tensors are
// packed NCHW float32 on the device; a layer holds its parameters (registered in a ParameterSet under torchvision's
// names) and its library descriptors, never its activations: the network owns those (resnet.h).
// ReLU, the residual add and global average pooling are own kernels (kernels.h).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "conv_graph.h"
#include "gpu.h"
#include "parameters.h"

namespace ac::cudnn {

// nn.Conv2d(in, out, kernel, stride, padding, bias=False).
class Conv2d {
 public:
  Conv2d(ParameterSet& params, const std::string& name, int in, int out, int kernel, int stride, int padding);
  ~Conv2d();
  Conv2d(const Conv2d&) = delete;
  Conv2d& operator=(const Conv2d&) = delete;

  Shape output(const Shape& in) const;
  // y = conv(x): an execution plan of cuDNN's graph API per input shape (conv_graph.h).
  void forward(Gpu& gpu, const Shape& in, const float* x, float* y);
  // weight.grad = ∂L/∂w (cudnnConvolutionBackwardFilter, overwritten); with dx, dx = dx_beta·dx + ∂L/∂x
  // (cudnnConvolutionBackwardData; dx_beta 1 adds a second path's gradient, as at a block's input).
  void backward(Gpu& gpu, const Shape& in, const float* x, const float* dy, float* dx, float dx_beta);

  const std::string name;

 private:
  // One input shape's (batch and resolution) forward plan, made on first forward; its backward algorithms (and
  // math types) on the descriptor API, chosen on first backward.
  struct Plan {
    std::unique_ptr<ConvForwardPlan> forward;
    bool backward = false;
    cudnnConvolutionBwdDataAlgo_t data{};
    cudnnConvolutionBwdFilterAlgo_t filter{};
    cudnnMathType_t data_math{}, filter_math{};
    size_t data_bytes = 0, filter_bytes = 0;
  };
  void check_input(const Shape& in) const;
  Plan& backward_plan(Gpu& gpu, const Shape& in);

  Param* weight_;
  int in_, out_, kernel_, stride_, padding_;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  std::map<Shape, Plan> plans_;
};

// nn.BatchNorm2d(channels): eps 1e-5, momentum 0.1, affine, running statistics (cuDNN spatial mode; the running
// variance is updated with the unbiased batch variance, as torch does).
class BatchNorm2d {
 public:
  static constexpr double kEps = 1e-5, kMomentum = 0.1;

  BatchNorm2d(ParameterSet& params, const std::string& name, int channels);
  ~BatchNorm2d();
  BatchNorm2d(const BatchNorm2d&) = delete;
  BatchNorm2d& operator=(const BatchNorm2d&) = delete;

  // Training: batch statistics, running statistics updated (cudnnBatchNormalizationForwardTraining).
  void forward_train(Gpu& gpu, const Shape& s, const float* x, float* y);
  // Evaluation: running statistics (cudnnBatchNormalizationForwardInference).
  void forward_eval(Gpu& gpu, const Shape& s, const float* x, float* y);
  // dx, weight.grad, bias.grad from the statistics saved by the last forward_train (cudnnBatchNormalizationBackward).
  void backward(Gpu& gpu, const Shape& s, const float* x, const float* dy, float* dx);

  const std::string name;

 private:
  Param *weight_, *bias_, *running_mean_, *running_var_;
  int channels_;
  Buffer<float> save_mean_, save_inv_std_;  // batch mean and 1/sqrt(var + eps) of the last forward_train
  cudnnTensorDescriptor_t stats_desc_ = nullptr;  // 1×C×1×1
};

// nn.MaxPool2d(3, stride=2, padding=1): cudnnPoolingForward / cudnnPoolingBackward (deterministic max).
class MaxPool2d {
 public:
  explicit MaxPool2d(const std::string& name);
  ~MaxPool2d();
  MaxPool2d(const MaxPool2d&) = delete;
  MaxPool2d& operator=(const MaxPool2d&) = delete;

  Shape output(const Shape& in) const;
  void forward(Gpu& gpu, const Shape& in, const float* x, float* y);
  void backward(Gpu& gpu, const Shape& in, const float* x, const float* y, const float* dy, float* dx);

  const std::string name;

 private:
  cudnnPoolingDescriptor_t desc_ = nullptr;
};

// nn.Linear(features, classes): y = x·Wᵀ + b with cublasSgemm (row-major tensors as column-major transposes).
class Linear {
 public:
  Linear(ParameterSet& params, const std::string& name, int features, int classes);

  void forward(Gpu& gpu, int n, const float* x, float* y);
  // weight.grad = dyᵀ·x, bias.grad = Σ_rows dy, dx = dy·W.
  void backward(Gpu& gpu, int n, const float* x, const float* dy, float* dx);

  const std::string name;
  const int features, classes;

 private:
  Param *weight_, *bias_;
};

}  // namespace ac::cudnn
