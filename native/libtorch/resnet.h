// Study A's ResNet-50 written with the LibTorch C++ frontend: torchvision's topology (models/resnet.py), with
// module names chosen so that named_parameters()/named_buffers() equal torchvision's state_dict keys
// ("layer2.0.downsample.1.running_var", "fc.bias", ...). That is what lets one weights file feed every backend.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "weights_file.h"

namespace ac {

// conv1x1 -> bn -> relu -> conv3x3 (stride here, as torchvision) -> bn -> relu -> conv1x1 -> bn, + skip, relu.
struct BottleneckImpl : torch::nn::Module {
  static constexpr int64_t kExpansion = 4;

  BottleneckImpl(int64_t inplanes, int64_t planes, int64_t stride, bool project);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  torch::nn::Sequential downsample{nullptr};  // projection (1×1 conv + bn) on the first block of each stage
};
TORCH_MODULE(Bottleneck);

// Stages [3, 4, 6, 3]; the stem takes `in_channels`, the classifier has `classes` outputs.
struct ResNet50Impl : torch::nn::Module {
  ResNet50Impl(int64_t in_channels, int64_t classes);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::MaxPool2d maxpool{nullptr};
  torch::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  torch::nn::AdaptiveAvgPool2d avgpool{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet50);

// Copy a weights file into the model: every float parameter and buffer must be present with its shape, and the
// file may hold nothing else (the integer num_batches_tracked counters are not stored, as in Python).
void load_weights(torch::nn::Module& model, const std::vector<NamedTensor>& weights, const std::string& path);

// The model's float parameters and buffers in weights-file form (for parity tests of training).
std::vector<NamedTensor> state_of(torch::nn::Module& model);

}  // namespace ac
