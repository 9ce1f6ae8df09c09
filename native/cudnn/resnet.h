// torchvision's ResNet-50 (models/resnet.py, v1.5: the stride on the bottleneck's 3×3 convolution), with the
// parameters registered under torchvision's state_dict names, so that the one init-weights file feeds it as it
// feeds every other backend. The network owns its activations: for training every activation backward needs,
// for inference only five rotating buffers; a network that does both holds the two sets in one allocation.
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

// The largest batch each kind of forward takes; 0: none of that kind.
struct Capacity {
  int training = 0;   // forward with batch statistics, then backward
  int inference = 0;  // forward with running statistics only
};

class ResNet50 {
 public:
  ResNet50(ParameterSet& params, int channels, int classes);

  // Activations for batches of height × width: for training batches of up to capacity.training images everything
  // backward needs (and gradient buffers), for inference batches of up to capacity.inference five rotating buffers
  // of the largest activation. The two sets share one allocation of the larger one's size: a training step's
  // activations are dead once its update has run, and an inference forward keeps nothing, so an inference forward
  // overwrites the last training forward's activations (backward refuses to run after one). Train's evaluation
  // batch may then exceed its training batch: the allocation grows only where its five buffers outgrow the
  // training storage, never by training storage for the evaluation batch.
  // After params.allocate(); a second call replaces the first's storage (the sweep reserves each cell's shape).
  void reserve(Capacity capacity, int height, int width);
  // Frees the activations (forward needs a reserve() again).
  void release();
  // Throws, naming the shape, where reserve() could not serve these batches: an input too small for the max pool,
  // a training batch with an activation beyond cuDNN's 2^31 - 1 elements per tensor (batch statistics need it in
  // one tensor), or one image with such an activation. Host only.
  void check_batch(Capacity capacity, int height, int width) const;
  // Samples per inference pass: all n, or, where an activation of n samples (`largest` elements each) would
  // exceed cuDNN's 2^31 - 1 elements per tensor, the size of equal passes that fit (torch splits such batches too).
  static int pass_size(int64_t largest, int n);
  // Logits (n × classes, on the device, valid until the next forward) of the normalised batch x (n×C×H×W):
  // batch statistics and running-statistics updates with `training`, running statistics without (in passes of
  // pass_size samples).
  const float* forward(Gpu& gpu, const float* x, int n, bool training);
  // After forward(..., training=true) of the same x, with no inference forward since: every parameter's gradient,
  // from ∂L/∂logits.
  void backward(Gpu& gpu, const float* x, const float* dlogits, int n);

  int classes() const { return fc_.classes; }
  const Capacity& capacity() const { return capacity_; }

 private:
  // A block's activations: conv and batch-norm outputs (bn1, bn2 after their ReLU; out after add and ReLU).
  struct Acts {
    float *c1, *b1, *c2, *b2, *c3, *out, *dc, *db;
  };
  // One set of activations (training or inference) inside storage_.
  struct Activations {
    float *stem_conv = nullptr, *stem_bn = nullptr, *stem_pool = nullptr, *pooled = nullptr, *logits = nullptr;
    std::vector<Acts> blocks;
    float* grads[4] = {nullptr, nullptr, nullptr, nullptr};  // training: ∂L/∂activation, rotating
    float* dpooled = nullptr;                                // training: ∂L/∂avgpool output
  };
  // Per-sample shapes at height × width: the stem's, each block's (input, conv1, conv2, conv3 outputs), the largest.
  struct Geometry {
    struct Block {
      Shape in, a, b, c;
    };
    Shape input, stem, pooled;
    std::vector<Block> blocks;
    int64_t largest = 0;  // elements per sample of the largest activation (or of the input, if larger)
  };
  Geometry geometry(int height, int width) const;
  // Lays out one set for `capacity` samples from `base` on (nullptr: sizes only); returns the floats it spans.
  int64_t lay_out(Activations& set, const Geometry& g, int capacity, bool training, float* base) const;
  // One pass of n samples through the network, its logits written to `logits`.
  void forward_pass(Gpu& gpu, const Activations& set, const float* x, int n, bool training, float* logits);
  void block_forward(Gpu& gpu, Bottleneck& b, const Acts& a, const Shape& in, const float* x, bool training);
  // dy (∂L/∂out, consumed) -> dx (∂L/∂x); scratch: two buffers of the largest activation.
  void block_backward(Gpu& gpu, Bottleneck& b, const Acts& a, const Shape& in, const float* x, float* dy,
                      float* dx, float* scratch1, float* scratch2);

  int channels_;
  Conv2d conv1_;
  BatchNorm2d bn1_;
  MaxPool2d maxpool_;
  std::vector<std::unique_ptr<Bottleneck>> blocks_;
  Linear fc_;

  Capacity capacity_;
  int height_ = 0, width_ = 0;
  int64_t largest_ = 0;  // elements per sample of the reserved shape's largest activation
  Buffer<float> storage_;
  Activations training_, inference_;
  bool training_forward_last_ = false;  // backward needs the training activations, which an inference forward reuses
};

}  // namespace ac::cudnn
