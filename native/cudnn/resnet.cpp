#include "resnet.h"

#include <algorithm>

#include "kernels.h"

namespace ac::cudnn {
namespace {

constexpr int kStages[4][2] = {{64, 3}, {128, 4}, {256, 6}, {512, 3}};  // planes, blocks

}  // namespace

Bottleneck::Bottleneck(ParameterSet& params, const std::string& name_, int inplanes, int planes, int stride)
    : name(name_),
      conv1(params, name_ + ".conv1", inplanes, planes, 1, 1, 0),
      conv2(params, name_ + ".conv2", planes, planes, 3, stride, 1),
      conv3(params, name_ + ".conv3", planes, planes * kExpansion, 1, 1, 0),
      bn1(params, name_ + ".bn1", planes),
      bn2(params, name_ + ".bn2", planes),
      bn3(params, name_ + ".bn3", planes * kExpansion) {
  if (stride != 1 || inplanes != planes * kExpansion) {
    downsample_conv = std::make_unique<Conv2d>(params, name_ + ".downsample.0", inplanes, planes * kExpansion, 1,
                                               stride, 0);
    downsample_bn = std::make_unique<BatchNorm2d>(params, name_ + ".downsample.1", planes * kExpansion);
  }
}

ResNet50::ResNet50(ParameterSet& params, int channels, int classes)
    : channels_(channels),
      conv1_(params, "conv1", channels, 64, 7, 2, 3),
      bn1_(params, "bn1", 64),
      maxpool_("maxpool"),
      fc_(params, "fc", 512 * Bottleneck::kExpansion, classes) {
  int inplanes = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const auto [planes, count] = kStages[stage];
    for (int i = 0; i < count; ++i) {
      const int stride = (i == 0 && stage > 0) ? 2 : 1;
      blocks_.push_back(std::make_unique<Bottleneck>(
          params, "layer" + std::to_string(stage + 1) + "." + std::to_string(i), inplanes, planes, stride));
      inplanes = planes * Bottleneck::kExpansion;
    }
  }
}

float* ResNet50::allocate(int64_t per_sample, const std::string& what) {
  storage_.emplace_back(static_cast<size_t>(per_sample * capacity_),
                        what + " (batch " + std::to_string(capacity_) + ")");
  return storage_.back().get();
}

void ResNet50::release() {
  storage_.clear();
  acts_.clear();
  stem_conv_ = stem_bn_ = stem_pool_ = pooled_ = logits_ = dpooled_ = nullptr;
  for (float*& g : grads_) g = nullptr;
  capacity_ = height_ = width_ = 0;
  training_storage_ = false;
}

void ResNet50::check_batch(int capacity, int height, int width) const {
  const Shape input{1, channels_, height, width};
  const Shape stem = conv1_.output(input), pooled = maxpool_.output(stem);
  if (pooled.h < 1 || pooled.w < 1)
    throw std::runtime_error("input " + std::to_string(height) + "×" + std::to_string(width) +
                             " is too small for ResNet-50 (maxpool output " + pooled.str() + ")");
  int64_t largest = std::max(stem.per_sample(), input.per_sample());
  Shape cur = pooled;
  for (const auto& blk : blocks_) {
    const Shape a = blk->conv1.output(cur), b = blk->conv2.output(a);
    cur = blk->conv3.output(b);
    largest = std::max({largest, a.per_sample(), b.per_sample(), cur.per_sample()});
  }
  // cuDNN's descriptors take fewer than 2^31 elements per tensor (cudnnSetTensor4dDescriptor: NOT_SUPPORTED at
  // 128×64×512×512 on an H100); torch splits such batches, this program does not
  constexpr int64_t kCudnnMaxElements = (int64_t{1} << 31) - 1;
  if (largest * capacity > kCudnnMaxElements)
    throw std::runtime_error("batch " + std::to_string(capacity) + " at " + std::to_string(height) + "×" +
                             std::to_string(width) + ": the largest activation has " +
                             std::to_string(largest * capacity) + " elements, more than the 2^31 - 1 a cuDNN "
                             "tensor may have (this program does not split batches)");
}

void ResNet50::reserve(int capacity, int height, int width, bool training) {
  if (capacity < 1) throw std::logic_error("ResNet50::reserve: capacity < 1");
  release();
  check_batch(capacity, height, width);
  capacity_ = capacity, height_ = height, width_ = width, training_storage_ = training;
  // every activation's shape for one sample, and the largest
  const Shape input{1, channels_, height, width};
  const Shape stem = conv1_.output(input), pooled = maxpool_.output(stem);
  struct BlockShapes {
    Shape in, a, b, c;
  };
  std::vector<BlockShapes> shapes;
  int64_t largest = std::max(stem.per_sample(), input.per_sample());
  Shape cur = pooled;
  for (auto& blk : blocks_) {
    BlockShapes s{cur, blk->conv1.output(cur), {}, {}};
    s.b = blk->conv2.output(s.a);
    s.c = blk->conv3.output(s.b);
    for (const Shape& x : {s.a, s.b, s.c}) largest = std::max(largest, x.per_sample());
    shapes.push_back(s);
    cur = s.c;
  }
  const int features = fc_.features, classes = fc_.classes;
  pooled_ = allocate(features, "avgpool output");
  logits_ = allocate(classes, "fc output");
  acts_.resize(blocks_.size());
  if (training) {
    stem_conv_ = allocate(stem.per_sample(), "conv1 output");
    stem_bn_ = allocate(stem.per_sample(), "bn1 output");
    stem_pool_ = allocate(pooled.per_sample(), "maxpool output");
    for (size_t i = 0; i < blocks_.size(); ++i) {
      const BlockShapes& s = shapes[i];
      const std::string& n = blocks_[i]->name;
      Acts& a = acts_[i];
      a.c1 = allocate(s.a.per_sample(), n + ".conv1 output");
      a.b1 = allocate(s.a.per_sample(), n + ".bn1 output");
      a.c2 = allocate(s.b.per_sample(), n + ".conv2 output");
      a.b2 = allocate(s.b.per_sample(), n + ".bn2 output");
      a.c3 = allocate(s.c.per_sample(), n + ".conv3 output");
      a.out = allocate(s.c.per_sample(), n + " output");
      a.dc = blocks_[i]->downsample_conv ? allocate(s.c.per_sample(), n + ".downsample.0 output") : nullptr;
      a.db = blocks_[i]->downsample_bn ? allocate(s.c.per_sample(), n + ".downsample.1 output") : nullptr;
    }
    for (float*& g : grads_) g = allocate(largest, "activation gradients");
    dpooled_ = allocate(features, "avgpool gradient");
    return;
  }
  // inference: a block reads X and writes A, B (main path) and C, D (downsample); its output lands in B, which is
  // the next block's X. Five buffers of the largest activation serve the whole network.
  float* pool[5];
  for (float*& p : pool) p = allocate(largest, "activations");
  stem_conv_ = pool[0], stem_bn_ = pool[1], stem_pool_ = pool[2];
  int x = 2;
  for (Acts& a : acts_) {
    int others[4], k = 0;
    for (int i = 0; i < 5; ++i)
      if (i != x) others[k++] = i;
    a.c1 = a.c2 = a.c3 = pool[others[0]];
    a.b1 = a.b2 = a.out = pool[others[1]];
    a.dc = pool[others[2]], a.db = pool[others[3]];
    x = others[1];
  }
}

void ResNet50::block_forward(Gpu& gpu, Bottleneck& b, const Acts& a, const Shape& in, const float* x,
                             bool training) {
  const cudaStream_t stream = gpu.stream();
  auto bn = [&](BatchNorm2d& layer, const Shape& s, const float* from, float* to) {
    training ? layer.forward_train(gpu, s, from, to) : layer.forward_eval(gpu, s, from, to);
  };
  const Shape sa = b.conv1.output(in), sb = b.conv2.output(sa), sc = b.conv3.output(sb);
  b.conv1.forward(gpu, in, x, a.c1);
  bn(b.bn1, sa, a.c1, a.b1);
  relu(a.b1, sa.numel(), stream, b.name + ".relu");
  b.conv2.forward(gpu, sa, a.b1, a.c2);
  bn(b.bn2, sb, a.c2, a.b2);
  relu(a.b2, sb.numel(), stream, b.name + ".relu");
  b.conv3.forward(gpu, sb, a.b2, a.c3);
  bn(b.bn3, sc, a.c3, a.out);
  const float* skip = x;
  if (b.downsample_conv) {
    b.downsample_conv->forward(gpu, in, x, a.dc);
    bn(*b.downsample_bn, sc, a.dc, a.db);
    skip = a.db;
  }
  add_relu(a.out, skip, sc.numel(), stream, b.name + " residual");
}

const float* ResNet50::forward(Gpu& gpu, const float* x, int n, bool training) {
  if (n < 1 || n > capacity_)
    throw std::logic_error("forward of a batch of " + std::to_string(n) + ", reserved for " +
                           std::to_string(capacity_));
  if (training && !training_storage_) throw std::logic_error("training forward on inference storage");
  const cudaStream_t stream = gpu.stream();
  const Shape input{n, channels_, height_, width_};
  const Shape stem = conv1_.output(input);
  conv1_.forward(gpu, input, x, stem_conv_);
  training ? bn1_.forward_train(gpu, stem, stem_conv_, stem_bn_) : bn1_.forward_eval(gpu, stem, stem_conv_, stem_bn_);
  relu(stem_bn_, stem.numel(), stream, "relu");
  Shape cur = maxpool_.output(stem);
  maxpool_.forward(gpu, stem, stem_bn_, stem_pool_);
  const float* h = stem_pool_;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Bottleneck& b = *blocks_[i];
    block_forward(gpu, b, acts_[i], cur, h, training);
    cur = b.conv3.output(b.conv2.output(b.conv1.output(cur)));
    h = acts_[i].out;
  }
  global_avg_pool(h, pooled_, int64_t{n} * cur.c, cur.h * cur.w, stream, "avgpool");
  fc_.forward(gpu, n, pooled_, logits_);
  return logits_;
}

void ResNet50::block_backward(Gpu& gpu, Bottleneck& b, const Acts& a, const Shape& in, const float* x, float* dy,
                              float* dx, float* g1, float* g2) {
  const cudaStream_t stream = gpu.stream();
  const Shape sa = b.conv1.output(in), sb = b.conv2.output(sa), sc = b.conv3.output(sb);
  relu_backward(dy, a.out, sc.numel(), stream, b.name + " residual");
  b.bn3.backward(gpu, sc, a.c3, dy, g1);
  b.conv3.backward(gpu, sb, a.b2, g1, g2, 0.0f);
  relu_backward(g2, a.b2, sb.numel(), stream, b.name + ".relu");
  b.bn2.backward(gpu, sb, a.c2, g2, g1);
  b.conv2.backward(gpu, sa, a.b1, g1, g2, 0.0f);
  relu_backward(g2, a.b1, sa.numel(), stream, b.name + ".relu");
  b.bn1.backward(gpu, sa, a.c1, g2, g1);
  b.conv1.backward(gpu, in, x, g1, dx, 0.0f);
  if (b.downsample_conv) {  // the skip's gradient is added to the main path's at the block's input
    b.downsample_bn->backward(gpu, sc, a.dc, dy, g1);
    b.downsample_conv->backward(gpu, in, x, g1, dx, 1.0f);
  } else {
    add(dx, dy, sc.numel(), stream, b.name + " residual");
  }
}

void ResNet50::backward(Gpu& gpu, const float* x, const float* dlogits, int n) {
  if (!training_storage_) throw std::logic_error("backward on inference storage");
  const cudaStream_t stream = gpu.stream();
  const Shape input{n, channels_, height_, width_};
  const Shape stem = conv1_.output(input), pooled = maxpool_.output(stem);
  std::vector<Shape> inputs;  // each block's input shape
  Shape cur = pooled;
  for (auto& b : blocks_) {
    inputs.push_back(cur);
    cur = b->conv3.output(b->conv2.output(b->conv1.output(cur)));
  }
  fc_.backward(gpu, n, pooled_, dlogits, dpooled_);
  float *dy = grads_[0], *dx = grads_[1];
  global_avg_pool_backward(dpooled_, dy, int64_t{n} * cur.c, cur.h * cur.w, stream, "avgpool");
  for (size_t i = blocks_.size(); i-- > 0;) {
    const float* block_input = i == 0 ? stem_pool_ : acts_[i - 1].out;
    block_backward(gpu, *blocks_[i], acts_[i], inputs[i], block_input, dy, dx, grads_[2], grads_[3]);
    std::swap(dy, dx);
  }
  maxpool_.backward(gpu, stem, stem_bn_, stem_pool_, dy, dx);
  relu_backward(dx, stem_bn_, stem.numel(), stream, "relu");
  bn1_.backward(gpu, stem, stem_conv_, dx, dy);
  conv1_.backward(gpu, input, x, dy, nullptr, 0.0f);
}

}  // namespace ac::cudnn
