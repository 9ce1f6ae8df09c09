#include "layers.h"

#include <algorithm>

#include "kernels.h"

namespace ac::cudnn {
namespace {

const float kOne = 1.0f, kZero = 0.0f;

// The first algorithm in cuDNN's order (heuristic rank, or measured time for find) that ran, fits the workspace
// limit and, with TF32 off, uses FMA math only (torch asserts the same of the algorithms it runs).
template <typename Perf>
const Perf& choose(const Perf* perf, int count, const ConvSettings& s, const std::string& what) {
  for (int i = 0; i < count; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= s.workspace_limit_bytes &&
        (s.tf32 || perf[i].mathType == CUDNN_FMA_MATH))
      return perf[i];
  throw GpuError(what + ": none of cuDNN's " + std::to_string(count) + " " + s.algo_name() +
                 " algorithms runs within --workspace-limit-mib " +
                 std::to_string(s.workspace_limit_bytes >> 20) + (s.tf32 ? "" : " with FMA math (TF32 off)"));
}

}  // namespace

// ------------------------------------------------------------------------------------------------ Conv2d
Conv2d::Conv2d(ParameterSet& params, const std::string& name_, int in, int out, int kernel, int stride,
               int padding)
    : name(name_), weight_(params.add(name_ + ".weight", {out, in, kernel, kernel}, true)), in_(in), out_(out),
      kernel_(kernel), stride_(stride), padding_(padding) {
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_desc_), name);
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, out, in, kernel, kernel),
              name);
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_desc_), name);
  // cross-correlation, as torch's conv2d
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_desc_, padding, padding, stride, stride, 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
              name);
}

Conv2d::~Conv2d() {
  cudnnDestroyConvolutionDescriptor(conv_desc_);
  cudnnDestroyFilterDescriptor(w_desc_);
}

Shape Conv2d::output(const Shape& in) const {
  const auto size = [&](int x) { return (x + 2 * padding_ - kernel_) / stride_ + 1; };
  return {in.n, out_, size(in.h), size(in.w)};
}

void Conv2d::check_input(const Shape& in) const {
  if (in.c != in_) throw GpuError(name + ": input " + in.str() + " has " + std::to_string(in.c) +
                                  " channels, the layer expects " + std::to_string(in_));
}

Conv2d::Plan& Conv2d::backward_plan(Gpu& gpu, const Shape& in) {
  check_input(in);
  Plan& p = plans_[in];
  if (p.backward) return p;
  const ConvSettings& s = gpu.settings();
  const cudnnTensorDescriptor_t x = gpu.tensor(in), y = gpu.tensor(output(in));
  // the math type the algorithms are chosen under: FMA only with TF32 off; otherwise cuDNN's default (TF32 allowed)
  CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, s.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH), name);
  // Find measures every algorithm; Get_v7 ranks them by cuDNN's heuristics (the same signature and results)
  const auto rank_data =
      s.find ? cudnnFindConvolutionBackwardDataAlgorithm : cudnnGetConvolutionBackwardDataAlgorithm_v7;
  const auto rank_filter =
      s.find ? cudnnFindConvolutionBackwardFilterAlgorithm : cudnnGetConvolutionBackwardFilterAlgorithm_v7;
  int count = 0;
  cudnnConvolutionBwdDataAlgoPerf_t data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  CUDNN_CHECK(rank_data(gpu.cudnn(), w_desc_, y, conv_desc_, x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, data),
              name);
  const auto& d = choose(data, count, s, name + " backward data");
  p.data = d.algo, p.data_math = d.mathType, p.data_bytes = d.memory;
  cudnnConvolutionBwdFilterAlgoPerf_t filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  CUDNN_CHECK(
      rank_filter(gpu.cudnn(), x, y, conv_desc_, w_desc_, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, filter),
      name);
  const auto& f = choose(filter, count, s, name + " backward filter");
  p.filter = f.algo, p.filter_math = f.mathType, p.filter_bytes = f.memory, p.backward = true;
  return p;
}

void Conv2d::forward(Gpu& gpu, const Shape& in, const float* x, float* y) {
  Plan& p = plans_[in];
  if (!p.forward) {
    check_input(in);
    p.forward = std::make_unique<ConvForwardPlan>(gpu, ConvGeometry{in, output(in), kernel_, stride_, padding_}, x,
                                                  weight_->value, y, name);
  }
  p.forward->run(gpu, x, weight_->value, y, gpu.workspace(p.forward->workspace_bytes(), name));
}

void Conv2d::backward(Gpu& gpu, const Shape& in, const float* x, const float* dy, float* dx, float dx_beta) {
  const Plan& p = backward_plan(gpu, in);
  const cudnnTensorDescriptor_t x_desc = gpu.tensor(in), y_desc = gpu.tensor(output(in));
  void* ws = gpu.workspace(std::max(p.data_bytes, p.filter_bytes), name);
  CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, p.filter_math), name);
  CUDNN_CHECK(cudnnConvolutionBackwardFilter(gpu.cudnn(), &kOne, x_desc, x, y_desc, dy, conv_desc_, p.filter, ws,
                                             p.filter_bytes, &kZero, w_desc_, weight_->grad),
              name);
  if (dx == nullptr) return;
  CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, p.data_math), name);
  CUDNN_CHECK(cudnnConvolutionBackwardData(gpu.cudnn(), &kOne, w_desc_, weight_->value, y_desc, dy, conv_desc_,
                                           p.data, ws, p.data_bytes, &dx_beta, x_desc, dx),
              name);
}

// ------------------------------------------------------------------------------------------- BatchNorm2d
BatchNorm2d::BatchNorm2d(ParameterSet& params, const std::string& name_, int channels)
    : name(name_),
      weight_(params.add(name_ + ".weight", {channels}, true)),
      bias_(params.add(name_ + ".bias", {channels}, true)),
      running_mean_(params.add(name_ + ".running_mean", {channels}, false)),
      running_var_(params.add(name_ + ".running_var", {channels}, false)),
      channels_(channels) {
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&stats_desc_), name);
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(stats_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, channels, 1, 1),
              name);
}

BatchNorm2d::~BatchNorm2d() { cudnnDestroyTensorDescriptor(stats_desc_); }

void BatchNorm2d::forward_train(Gpu& gpu, const Shape& s, const float* x, float* y) {
  if (!save_mean_.get()) {  // on first use: a network is built (and its weights file checked) before the GPU opens
    save_mean_ = Buffer<float>(channels_, name + ": saved mean");
    save_inv_std_ = Buffer<float>(channels_, name + ": saved inverse std");
  }
  const cudnnTensorDescriptor_t desc = gpu.tensor(s);
  CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(gpu.cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, desc, x,
                                                     desc, y, stats_desc_, weight_->value, bias_->value, kMomentum,
                                                     running_mean_->value, running_var_->value, kEps,
                                                     save_mean_.get(), save_inv_std_.get()),
              name);
}

void BatchNorm2d::forward_eval(Gpu& gpu, const Shape& s, const float* x, float* y) {
  const cudnnTensorDescriptor_t desc = gpu.tensor(s);
  CUDNN_CHECK(cudnnBatchNormalizationForwardInference(gpu.cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, desc, x,
                                                      desc, y, stats_desc_, weight_->value, bias_->value,
                                                      running_mean_->value, running_var_->value, kEps),
              name);
}

void BatchNorm2d::backward(Gpu& gpu, const Shape& s, const float* x, const float* dy, float* dx) {
  const cudnnTensorDescriptor_t desc = gpu.tensor(s);
  CUDNN_CHECK(cudnnBatchNormalizationBackward(gpu.cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero,
                                              desc, x, desc, dy, desc, dx, stats_desc_, weight_->value,
                                              weight_->grad, bias_->grad, kEps, save_mean_.get(),
                                              save_inv_std_.get()),
              name);
}

// --------------------------------------------------------------------------------------------- MaxPool2d
MaxPool2d::MaxPool2d(const std::string& name_) : name(name_) {
  CUDNN_CHECK(cudnnCreatePoolingDescriptor(&desc_), name);
  CUDNN_CHECK(cudnnSetPooling2dDescriptor(desc_, CUDNN_POOLING_MAX_DETERMINISTIC, CUDNN_PROPAGATE_NAN, 3, 3, 1, 1,
                                          2, 2),
              name);
}

MaxPool2d::~MaxPool2d() { cudnnDestroyPoolingDescriptor(desc_); }

Shape MaxPool2d::output(const Shape& in) const {
  const auto size = [](int x) { return (x + 2 - 3) / 2 + 1; };
  return {in.n, in.c, size(in.h), size(in.w)};
}

void MaxPool2d::forward(Gpu& gpu, const Shape& in, const float* x, float* y) {
  CUDNN_CHECK(cudnnPoolingForward(gpu.cudnn(), desc_, &kOne, gpu.tensor(in), x, &kZero, gpu.tensor(output(in)), y),
              name);
}

void MaxPool2d::backward(Gpu& gpu, const Shape& in, const float* x, const float* y, const float* dy, float* dx) {
  const cudnnTensorDescriptor_t x_desc = gpu.tensor(in), y_desc = gpu.tensor(output(in));
  CUDNN_CHECK(cudnnPoolingBackward(gpu.cudnn(), desc_, &kOne, y_desc, y, y_desc, dy, x_desc, x, &kZero, x_desc, dx),
              name);
}

// ------------------------------------------------------------------------------------------------ Linear
Linear::Linear(ParameterSet& params, const std::string& name_, int features_, int classes_)
    : name(name_), features(features_), classes(classes_),
      weight_(params.add(name_ + ".weight", {classes_, features_}, true)),
      bias_(params.add(name_ + ".bias", {classes_}, true)) {}

// Row-major x (n×F), W (K×F), y (n×K) are column-major xᵀ (F×n), Wᵀ (F×K), yᵀ (K×n):
// yᵀ = (Wᵀ)ᵀ·xᵀ.
void Linear::forward(Gpu& gpu, int n, const float* x, float* y) {
  CUBLAS_CHECK(cublasSgemm(gpu.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, classes, n, features, &kOne, weight_->value,
                           features, x, features, &kZero, y, classes),
               name);
  add_bias(y, bias_->value, n, classes, gpu.stream(), name);
}

void Linear::backward(Gpu& gpu, int n, const float* x, const float* dy, float* dx) {
  // dWᵀ (F×K) = xᵀ (F×n) · (dyᵀ)ᵀ (n×K)
  CUBLAS_CHECK(cublasSgemm(gpu.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, features, classes, n, &kOne, x, features, dy,
                           classes, &kZero, weight_->grad, features),
               name);
  column_sums(dy, bias_->grad, n, classes, gpu.stream(), name);
  // dxᵀ (F×n) = Wᵀ (F×K) · dyᵀ (K×n)
  CUBLAS_CHECK(cublasSgemm(gpu.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, features, n, classes, &kOne, weight_->value,
                           features, dy, classes, &kZero, dx, features),
               name);
}

}  // namespace ac::cudnn
