// torchvision's ResNet-50 (models/resnet.py, v1.5: the stride on the bottleneck's 3×3 convolution), with the
// parameters registered under torchvision's state_dict names, so that the one init-weights file feeds it as it
// feeds every other backend. The network owns its activations: for training every activation backward needs,
// for inference only five rotating buffers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers.h"

namespace ac::cudnn {

// conv1 1×1 -> bn1 -> relu -> conv2 3×3 (stride) -> bn2 -> relu -> conv3 1×1 -> bn3, + skip, relu. The skip is
// the input, or downsample (1×1 conv with the stride + bn) on the first block of a stage.
struct Bottleneck {
  static constexpr int kExpansion = 4;

  Bottleneck(ParameterSet& params, const std::string& name, int inplanes, int planes, int stride);

  const std::string name;
  Conv2d conv1, conv2, conv3;
  BatchNorm2d bn1, bn2, bn3;
  std::unique_ptr<Conv2d> downsample_conv;
  std::unique_ptr<BatchNorm2d> downsample_bn;
};

class ResNet50 {
 public:
  ResNet50(ParameterSet& params, int channels, int classes);

  // Activations for batches of up to `capacity` images of height × width. `training` keeps what backward needs
  // (and gradient buffers); otherwise the forward reuses five buffers. After params.allocate(); a second call
  // replaces the first's storage (the sweep reserves each cell's shape).
  void reserve(int capacity, int height, int width, bool training);
  // Frees the activations (forward needs a reserve() again).
  void release();
  // Throws, naming the shape, where reserve() could not serve this batch: an input too small for the max pool, or
  // an activation beyond cuDNN's 2^31 - 1 elements per tensor. Host only.
  void check_batch(int capacity, int height, int width) const;

  // Logits (n × classes, on the device, valid until the next forward) of the normalised batch x (n×C×H×W):
  // batch statistics and running-statistics updates with `training`, running statistics without.
  const float* forward(Gpu& gpu, const float* x, int n, bool training);
  // After forward(..., training=true) of the same x: every parameter's gradient, from ∂L/∂logits.
  void backward(Gpu& gpu, const float* x, const float* dlogits, int n);

  int classes() const { return fc_.classes; }
  int capacity() const { return capacity_; }

 private:
  // A block's activations: conv and batch-norm outputs (bn1, bn2 after their ReLU; out after add and ReLU).
  struct Acts {
    float *c1, *b1, *c2, *b2, *c3, *out, *dc, *db;
  };
  void block_forward(Gpu& gpu, Bottleneck& b, const Acts& a, const Shape& in, const float* x, bool training);
  // dy (∂L/∂out, consumed) -> dx (∂L/∂x); scratch: two buffers of the largest activation.
  void block_backward(Gpu& gpu, Bottleneck& b, const Acts& a, const Shape& in, const float* x, float* dy,
                      float* dx, float* scratch1, float* scratch2);
  float* allocate(int64_t per_sample, const std::string& what);

  int channels_;
  Conv2d conv1_;
  BatchNorm2d bn1_;
  MaxPool2d maxpool_;
  std::vector<std::unique_ptr<Bottleneck>> blocks_;
  Linear fc_;

  int capacity_ = 0, height_ = 0, width_ = 0;
  bool training_storage_ = false;
  std::vector<Buffer<float>> storage_;
  float *stem_conv_ = nullptr, *stem_bn_ = nullptr, *stem_pool_ = nullptr, *pooled_ = nullptr,
        *logits_ = nullptr;
  std::vector<Acts> acts_;
  float* grads_[4] = {nullptr, nullptr, nullptr, nullptr};  // training: ∂L/∂activation, rotating
  float* dpooled_ = nullptr;
};

}  // namespace ac::cudnn
