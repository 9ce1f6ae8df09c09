#include "resnet.h"

#include <map>
#include <stdexcept>

namespace ac {
namespace nn = torch::nn;

namespace {

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false));
}

// torch's defaults, spelt out because parity depends on them: momentum 0.1, eps 1e-5, affine, running stats.
nn::BatchNorm2d batch_norm(int64_t features) {
  return nn::BatchNorm2d(nn::BatchNorm2dOptions(features).eps(1e-5).momentum(0.1).affine(true)
                             .track_running_stats(true));
}

nn::Sequential stage(int64_t& inplanes, int64_t planes, int64_t blocks, int64_t stride) {
  nn::Sequential seq;
  const bool project = stride != 1 || inplanes != planes * BottleneckImpl::kExpansion;
  seq->push_back(Bottleneck(inplanes, planes, stride, project));
  inplanes = planes * BottleneckImpl::kExpansion;
  for (int64_t i = 1; i < blocks; ++i) seq->push_back(Bottleneck(inplanes, planes, 1, false));
  return seq;
}

}  // namespace

BottleneckImpl::BottleneckImpl(int64_t inplanes, int64_t planes, int64_t stride, bool project) {
  const int64_t out = planes * kExpansion;
  conv1 = register_module("conv1", conv(inplanes, planes, 1, 1, 0));
  bn1 = register_module("bn1", batch_norm(planes));
  conv2 = register_module("conv2", conv(planes, planes, 3, stride, 1));
  bn2 = register_module("bn2", batch_norm(planes));
  conv3 = register_module("conv3", conv(planes, out, 1, 1, 0));
  bn3 = register_module("bn3", batch_norm(out));
  if (project) downsample = register_module("downsample", nn::Sequential(conv(inplanes, out, 1, stride, 0),
                                                                         batch_norm(out)));
}

torch::Tensor BottleneckImpl::forward(torch::Tensor x) {
  torch::Tensor out = torch::relu(bn1(conv1(x)));
  out = torch::relu(bn2(conv2(out)));
  out = bn3(conv3(out));
  out += downsample ? downsample->forward(x) : x;
  return torch::relu(out);
}

ResNet50Impl::ResNet50Impl(int64_t in_channels, int64_t classes) {
  int64_t inplanes = 64;
  conv1 = register_module("conv1", conv(in_channels, 64, 7, 2, 3));
  bn1 = register_module("bn1", batch_norm(64));
  maxpool = register_module("maxpool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
  layer1 = register_module("layer1", stage(inplanes, 64, 3, 1));
  layer2 = register_module("layer2", stage(inplanes, 128, 4, 2));
  layer3 = register_module("layer3", stage(inplanes, 256, 6, 2));
  layer4 = register_module("layer4", stage(inplanes, 512, 3, 2));
  avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({1, 1})));
  fc = register_module("fc", nn::Linear(512 * BottleneckImpl::kExpansion, classes));
}

torch::Tensor ResNet50Impl::forward(torch::Tensor x) {
  x = maxpool(torch::relu(bn1(conv1(x))));
  x = layer4->forward(layer3->forward(layer2->forward(layer1->forward(x))));
  return fc(torch::flatten(avgpool(x), 1));
}

namespace {

// Float parameters and buffers by their dotted names, exactly the keys of a torchvision state_dict.
std::map<std::string, torch::Tensor> float_state(torch::nn::Module& model) {
  std::map<std::string, torch::Tensor> state;
  for (const auto& item : model.named_parameters(true)) state[item.key()] = item.value();
  for (const auto& item : model.named_buffers(true))
    if (item.value().is_floating_point()) state[item.key()] = item.value();
  return state;
}

}  // namespace

void load_weights(torch::nn::Module& model, const std::vector<NamedTensor>& weights, const std::string& path) {
  auto state = float_state(model);
  std::map<std::string, const NamedTensor*> given;
  for (const auto& t : weights) given[t.name] = &t;
  std::string missing, unexpected;
  for (const auto& [name, tensor] : state)
    if (!given.count(name)) missing += (missing.empty() ? "" : ", ") + name;
  for (const auto& [name, tensor] : given)
    if (!state.count(name)) unexpected += (unexpected.empty() ? "" : ", ") + name;
  if (!missing.empty() || !unexpected.empty())
    throw WeightsFileError(path + ": does not fit the model: missing [" + missing + "], unexpected [" +
                           unexpected + "]");
  torch::NoGradGuard no_grad;
  for (auto& [name, target] : state) {
    const NamedTensor& t = *given[name];
    if (target.sizes().vec() != t.shape)
      throw WeightsFileError(path + ": " + name + " has shape " + shape_string(t.shape) + ", the model expects " +
                             shape_string(target.sizes().vec()));
    auto source = torch::from_blob(const_cast<float*>(t.data.data()), t.shape, torch::kFloat32);
    target.copy_(source);
  }
}

std::vector<NamedTensor> state_of(torch::nn::Module& model) {
  std::vector<NamedTensor> out;
  for (const auto& [name, tensor] : float_state(model)) {
    auto cpu = tensor.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    const float* data = cpu.data_ptr<float>();
    out.push_back({name, cpu.sizes().vec(), std::vector<float>(data, data + cpu.numel())});
  }
  return out;
}

}  // namespace ac
