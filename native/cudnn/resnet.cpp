#include "resnet.h"

#include <algorithm>

#include "kernels.h"

namespace ac::cudnn {
namespace {

constexpr int kStages[4][2] = {{64, 3}, {128, 4}, {256, 6}, {512, 3}};  // planes, blocks
// cuDNN's tensors hold fewer than 2^31 elements (cudnnSetTensor4dDescriptor: NOT_SUPPORTED at 128×64×512×512)
constexpr int64_t kCudnnMaxElements = (int64_t{1} << 31) - 1;

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

ResNet50::Geometry ResNet50::geometry(int height, int width) const {
  Geometry g;
  g.input = {1, channels_, height, width};
  g.stem = conv1_.output(g.input);
  g.pooled = maxpool_.output(g.stem);
  g.largest = std::max(g.stem.per_sample(), g.input.per_sample());
  Shape cur = g.pooled;
  for (const auto& blk : blocks_) {
    Geometry::Block s{cur, blk->conv1.output(cur), {}, {}};
    s.b = blk->conv2.output(s.a);
    s.c = blk->conv3.output(s.b);
    for (const Shape& x : {s.a, s.b, s.c}) g.largest = std::max(g.largest, x.per_sample());
    g.blocks.push_back(s);
    cur = s.c;
  }
  return g;
}

void ResNet50::release() {
  storage_ = Buffer<float>();
  training_ = inference_ = Activations{};
  capacity_ = Capacity{};
  height_ = width_ = 0;
  largest_ = 0;
  training_forward_last_ = false;
}

void ResNet50::check_batch(Capacity capacity, int height, int width) const {
  const Shape input{1, channels_, height, width};
  const Shape pooled = maxpool_.output(conv1_.output(input));
  if (pooled.h < 1 || pooled.w < 1)
    throw std::runtime_error("input " + std::to_string(height) + "×" + std::to_string(width) +
                             " is too small for ResNet-50 (maxpool output " + pooled.str() + ")");
  const int64_t largest = geometry(height, width).largest;
  const std::string at = " at " + std::to_string(height) + "×" + std::to_string(width) + ": the largest activation";
  // batch statistics need the whole training batch in one tensor; an inference batch is split (pass_size)
  if (largest * capacity.training > kCudnnMaxElements)
    throw std::runtime_error("training batch " + std::to_string(capacity.training) + at + " has " +
                             std::to_string(largest * capacity.training) + " elements, more than the 2^31 - 1 a "
                             "cuDNN tensor may have");
  if (capacity.inference > 0 && largest > kCudnnMaxElements)
    throw std::runtime_error("one image" + at + " has " + std::to_string(largest) +
                             " elements, more than the 2^31 - 1 a cuDNN tensor may have");
}

int ResNet50::pass_size(int64_t largest, int n) {
  const int64_t fits = kCudnnMaxElements / largest;  // samples per tensor
  const int64_t passes = (n + fits - 1) / fits;
  return static_cast<int>((n + passes - 1) / passes);
}

int64_t ResNet50::lay_out(Activations& set, const Geometry& g, int capacity, bool training, float* base) const {
  set = Activations{};
  if (capacity == 0) return 0;
  int64_t used = 0;
  // an inference set holds one pass's activations (a batch split by pass_size) and the whole batch's logits
  const int pass = training ? capacity : pass_size(g.largest, capacity);
  const auto take = [&](int64_t per_sample, int samples) {  // 256-byte aligned, as cudaMalloc's own pointers
    float* p = base ? base + used : nullptr;
    used += (per_sample * samples + 63) / 64 * 64;
    return p;
  };
  set.logits = take(fc_.classes, capacity);
  set.pooled = take(fc_.features, pass);
  set.blocks.resize(blocks_.size());
  if (training) {
    set.stem_conv = take(g.stem.per_sample(), pass);
    set.stem_bn = take(g.stem.per_sample(), pass);
    set.stem_pool = take(g.pooled.per_sample(), pass);
    for (size_t i = 0; i < blocks_.size(); ++i) {
      const Geometry::Block& s = g.blocks[i];
      Acts& a = set.blocks[i];
      a.c1 = take(s.a.per_sample(), pass);
      a.b1 = take(s.a.per_sample(), pass);
      a.c2 = take(s.b.per_sample(), pass);
      a.b2 = take(s.b.per_sample(), pass);
      a.c3 = take(s.c.per_sample(), pass);
      a.out = take(s.c.per_sample(), pass);
      a.dc = blocks_[i]->downsample_conv ? take(s.c.per_sample(), pass) : nullptr;
      a.db = blocks_[i]->downsample_bn ? take(s.c.per_sample(), pass) : nullptr;
    }
    for (float*& grad : set.grads) grad = take(g.largest, pass);
    set.dpooled = take(fc_.features, pass);
    return used;
  }
  // inference: a block reads X and writes A, B (main path) and C, D (downsample); its output lands in B, which is
  // the next block's X. Five buffers of the largest activation serve the whole network.
  float* pool[5];
  for (float*& p : pool) p = take(g.largest, pass);
  set.stem_conv = pool[0], set.stem_bn = pool[1], set.stem_pool = pool[2];
  int x = 2;
  for (Acts& a : set.blocks) {
    int others[4], k = 0;
    for (int i = 0; i < 5; ++i)
      if (i != x) others[k++] = i;
    a.c1 = a.c2 = a.c3 = pool[others[0]];
    a.b1 = a.b2 = a.out = pool[others[1]];
    a.dc = pool[others[2]], a.db = pool[others[3]];
    x = others[1];
  }
  return used;
}

void ResNet50::reserve(Capacity capacity, int height, int width) {
  if (capacity.training < 0 || capacity.inference < 0 || capacity.training + capacity.inference < 1)
    throw std::logic_error("ResNet50::reserve: no batch to reserve for");
  release();
  check_batch(capacity, height, width);
  const Geometry g = geometry(height, width);
  const int64_t floats = std::max(lay_out(training_, g, capacity.training, true, nullptr),
                                  lay_out(inference_, g, capacity.inference, false, nullptr));
  std::string what;  // the sets it holds, for an out-of-memory error
  if (capacity.training) what = "training batch " + std::to_string(capacity.training);
  if (capacity.inference)
    what += (what.empty() ? "" : ", ") + ("inference batch " + std::to_string(capacity.inference));
  storage_ = Buffer<float>(static_cast<size_t>(floats), "activations (" + what + ")");
  lay_out(training_, g, capacity.training, true, storage_.get());
  lay_out(inference_, g, capacity.inference, false, storage_.get());
  capacity_ = capacity, height_ = height, width_ = width, largest_ = g.largest;
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
  const int reserved = training ? capacity_.training : capacity_.inference;
  if (n < 1 || n > reserved)
    throw std::logic_error(std::string(training ? "training" : "inference") + " forward of a batch of " +
                           std::to_string(n) + ", reserved for " + std::to_string(reserved));
  const Activations& set = training ? training_ : inference_;
  training_forward_last_ = training;
  const int pass = training ? n : pass_size(largest_, n);
  const int64_t image = int64_t{channels_} * height_ * width_;
  for (int first = 0; first < n; first += pass)
    forward_pass(gpu, set, x + first * image, std::min(pass, n - first), training,
                 set.logits + int64_t{first} * fc_.classes);
  return set.logits;
}

void ResNet50::forward_pass(Gpu& gpu, const Activations& set, const float* x, int n, bool training, float* logits) {
  const cudaStream_t stream = gpu.stream();
  const Shape input{n, channels_, height_, width_};
  const Shape stem = conv1_.output(input);
  conv1_.forward(gpu, input, x, set.stem_conv);
  training ? bn1_.forward_train(gpu, stem, set.stem_conv, set.stem_bn)
           : bn1_.forward_eval(gpu, stem, set.stem_conv, set.stem_bn);
  relu(set.stem_bn, stem.numel(), stream, "relu");
  Shape cur = maxpool_.output(stem);
  maxpool_.forward(gpu, stem, set.stem_bn, set.stem_pool);
  const float* h = set.stem_pool;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Bottleneck& b = *blocks_[i];
    block_forward(gpu, b, set.blocks[i], cur, h, training);
    cur = b.conv3.output(b.conv2.output(b.conv1.output(cur)));
    h = set.blocks[i].out;
  }
  global_avg_pool(h, set.pooled, int64_t{n} * cur.c, cur.h * cur.w, stream, "avgpool");
  fc_.forward(gpu, n, set.pooled, logits);
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
  if (!training_forward_last_)
    throw std::logic_error("backward without a training forward since the last inference forward");
  if (n < 1 || n > capacity_.training)
    throw std::logic_error("backward of a batch of " + std::to_string(n) + ", reserved for " +
                           std::to_string(capacity_.training));
  const Activations& set = training_;
  const cudaStream_t stream = gpu.stream();
  const Shape input{n, channels_, height_, width_};
  const Shape stem = conv1_.output(input), pooled = maxpool_.output(stem);
  std::vector<Shape> inputs;  // each block's input shape
  Shape cur = pooled;
  for (auto& b : blocks_) {
    inputs.push_back(cur);
    cur = b->conv3.output(b->conv2.output(b->conv1.output(cur)));
  }
  fc_.backward(gpu, n, set.pooled, dlogits, set.dpooled);
  float *dy = set.grads[0], *dx = set.grads[1];
  global_avg_pool_backward(set.dpooled, dy, int64_t{n} * cur.c, cur.h * cur.w, stream, "avgpool");
  for (size_t i = blocks_.size(); i-- > 0;) {
    const float* block_input = i == 0 ? set.stem_pool : set.blocks[i - 1].out;
    block_backward(gpu, *blocks_[i], set.blocks[i], inputs[i], block_input, dy, dx, set.grads[2], set.grads[3]);
    std::swap(dy, dx);
  }
  maxpool_.backward(gpu, stem, set.stem_bn, set.stem_pool, dy, dx);
  relu_backward(dx, set.stem_bn, stem.numel(), stream, "relu");
  bn1_.backward(gpu, stem, set.stem_conv, dx, dy);
  conv1_.backward(gpu, input, x, dy, nullptr, 0.0f);
}

}  // namespace ac::cudnn
