// The network's parameters and batch-norm buffers by their torchvision state_dict names ("layer2.0.bn1.weight"),
// as in the init-weights file. Trainable values, their gradients and their momentum buffers each live in one flat
// device array, so that one SGD kernel updates every parameter; each tensor starts 256-byte aligned, as cuDNN
// prefers. Register every tensor (add), check() a weights file, then allocate() and upload(). Evaluation allocates
// neither gradients nor momentum buffers (ResNet-50: 98 MiB each).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpu.h"
#include "weights_file.h"

namespace ac::cudnn {

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  bool trainable = true;  // false: a batch-norm running statistic (a buffer, no gradient)
  size_t offset = 0;      // in floats, into the flat array of its kind
  float* value = nullptr;
  float* grad = nullptr;  // trainable only

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

class ParameterSet {
 public:
  Param* add(const std::string& name, std::vector<int64_t> shape, bool trainable);
  // Device arrays for values and running statistics; gradients and momentum buffers only `for_training`.
  void allocate(bool for_training);

  // Every registered tensor must be in the file with its shape, and nothing else: otherwise an error naming the
  // file and the tensor (its layer). Host only: runs before the GPU is opened.
  void check(const std::vector<NamedTensor>& weights, const std::string& path) const;
  // Copies checked weights to the device (after allocate()).
  void upload(const std::vector<NamedTensor>& weights);
  std::vector<NamedTensor> save() const;

  // The flat arrays of trainable values, gradients and momentum buffers (null unless allocated for training),
  // trainable_floats() long.
  float* values() const { return values_.get(); }
  float* grads() const { return grads_.get(); }
  float* momenta() const { return momenta_.get(); }
  size_t trainable_floats() const { return values_.size(); }
  size_t count() const { return params_.size(); }

 private:
  std::vector<std::unique_ptr<Param>> params_;
  size_t trainable_floats_ = 0, buffer_floats_ = 0;
  Buffer<float> values_, grads_, momenta_, buffers_;
};

}  // namespace ac::cudnn
