#include "parameters.h"

#include <map>

namespace ac::cudnn {
namespace {

constexpr size_t kAlignFloats = 64;  // 256 bytes

size_t aligned(size_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

}  // namespace

Param* ParameterSet::add(const std::string& name, std::vector<int64_t> shape, bool trainable) {
  if (values_.get() || buffers_.get()) throw std::logic_error(name + ": registered after allocate()");
  auto p = std::make_unique<Param>();
  p->name = name;
  p->shape = std::move(shape);
  p->trainable = trainable;
  size_t& end = trainable ? trainable_floats_ : buffer_floats_;
  p->offset = end;
  end += aligned(static_cast<size_t>(p->numel()));
  params_.push_back(std::move(p));
  return params_.back().get();
}

void ParameterSet::allocate(bool for_training) {
  values_ = Buffer<float>(trainable_floats_, "parameters");
  if (for_training) {
    grads_ = Buffer<float>(trainable_floats_, "gradients");
    momenta_ = Buffer<float>(trainable_floats_, "SGD momentum buffers");
  }
  buffers_ = Buffer<float>(buffer_floats_, "batch-norm running statistics");
  // zeros everywhere (the alignment gaps stay zero under SGD); momentum buffers start at zero, which makes
  // torch's first step (buffer = gradient) the general formula's buffer = momentum × 0 + gradient
  for (Buffer<float>* b : {&values_, &grads_, &momenta_, &buffers_})
    if (b->get()) CUDA_CHECK(cudaMemset(b->get(), 0, b->bytes()), "parameters");
  for (auto& p : params_) {
    p->value = (p->trainable ? values_.get() : buffers_.get()) + p->offset;
    p->grad = p->trainable && for_training ? grads_.get() + p->offset : nullptr;
  }
}

void ParameterSet::check(const std::vector<NamedTensor>& weights, const std::string& path) const {
  std::map<std::string, const NamedTensor*> given;
  for (const auto& t : weights) given[t.name] = &t;
  std::map<std::string, const Param*> wanted;
  for (const auto& p : params_) wanted[p->name] = p.get();
  std::string missing, unexpected;
  for (const auto& [name, p] : wanted)
    if (!given.count(name)) missing += (missing.empty() ? "" : ", ") + name;
  for (const auto& [name, t] : given)
    if (!wanted.count(name)) unexpected += (unexpected.empty() ? "" : ", ") + name;
  if (!missing.empty() || !unexpected.empty())
    throw WeightsFileError(path + ": does not fit the model: missing [" + missing + "], unexpected [" +
                           unexpected + "]");
  for (const auto& p : params_) {
    const NamedTensor& t = *given[p->name];
    if (t.shape != p->shape)
      throw WeightsFileError(path + ": " + p->name + " has shape " + shape_string(t.shape) +
                             ", the model expects " + shape_string(p->shape));
  }
}

void ParameterSet::upload(const std::vector<NamedTensor>& weights) {
  std::map<std::string, const NamedTensor*> given;
  for (const auto& t : weights) given[t.name] = &t;
  for (const auto& p : params_) {
    const NamedTensor& t = *given.at(p->name);
    CUDA_CHECK(cudaMemcpy(p->value, t.data.data(), t.data.size() * sizeof(float), cudaMemcpyHostToDevice),
               p->name);
  }
}

std::vector<NamedTensor> ParameterSet::save() const {
  std::vector<NamedTensor> out;
  for (const auto& p : params_) {
    NamedTensor t{p->name, p->shape, std::vector<float>(static_cast<size_t>(p->numel()))};
    CUDA_CHECK(cudaMemcpy(t.data.data(), p->value, t.data.size() * sizeof(float), cudaMemcpyDeviceToHost),
               p->name);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace ac::cudnn
