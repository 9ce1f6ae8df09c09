#include "conv_graph.h"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "timer.h"

namespace ac::cudnn {
namespace {

constexpr int64_t kX = 1, kW = 2, kY = 3;  // the tensors' unique ids in the graph and in the variant pack
// Every device buffer here is at least 256-byte aligned (cudaMalloc, ParameterSet, the activation layout); 16 bytes
// is what cuDNN's vectorised engines ask for.
constexpr int64_t kAlignment = 16;
constexpr int kFindRuns = 3;  // timed runs per candidate engine in `find` (after one untimed run)

void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
         int64_t count, const void* value, const std::string& where) {
  CUDNN_CHECK(cudnnBackendSetAttribute(d, name, type, count, value), where);
}

// A packed NCHW float tensor of the graph.
BackendDescriptor tensor(int64_t uid, const std::array<int64_t, 4>& dims, const std::string& where) {
  BackendDescriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR, where);
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  const int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  set(t.get(), CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, where);
  set(t.get(), CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(), where);
  set(t.get(), CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, where);
  set(t.get(), CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, where);
  set(t.get(), CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment, where);
  CUDNN_CHECK(cudnnBackendFinalize(t.get()), where);
  return t;
}

// The engine configurations cuDNN's heuristics propose in `mode`, best first (none where the mode has none).
std::vector<BackendDescriptor> engine_configs(cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode,
                                              const std::string& where) {
  BackendDescriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, where);
  set(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, where);
  set(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, where);
  if (cudnnBackendFinalize(heuristics.get()) != CUDNN_STATUS_SUCCESS) return {};
  int64_t count = 0;
  CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
              where);
  std::vector<BackendDescriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, where);
    raw.push_back(configs.back().get());
  }
  CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, raw.data()),
              where);
  configs.resize(static_cast<size_t>(count));
  return configs;
}

// An engine configuration's engine index, and whether its numerics are allowed: never inputs converted down or
// reductions in lower precision; tensor cores (TF32 on float data) only with TF32 on.
struct Engine {
  int64_t index = -1;
  bool allowed = false;
};

Engine engine_of(cudnnBackendDescriptor_t config, bool tf32, const std::string& where) {
  BackendDescriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, where);
  cudnnBackendDescriptor_t e = engine.get();
  int64_t n = 0;
  CUDNN_CHECK(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e),
              where);
  Engine out;
  CUDNN_CHECK(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &out.index),
              where);
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  CUDNN_CHECK(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                       CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes),
              where);
  out.allowed = std::none_of(notes, notes + n, [&](cudnnBackendNumericalNote_t note) {
    return note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
           note == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION ||
           (!tf32 && note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE);
  });
  return out;
}

BackendDescriptor variant_pack(const void* const pointers[4], const std::string& where) {
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, where);
  const int64_t uids[3] = {kX, kW, kY};
  void* data[3] = {const_cast<void*>(pointers[0]), const_cast<void*>(pointers[1]), const_cast<void*>(pointers[2])};
  void* workspace = const_cast<void*>(pointers[3]);
  set(pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids, where);
  set(pack.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, data, where);
  set(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace, where);
  CUDNN_CHECK(cudnnBackendFinalize(pack.get()), where);
  return pack;
}

// Median device time of kFindRuns executions of `plan` (after one untimed run); infinity where it fails to run.
float time_plan(Gpu& gpu, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack, const std::string& where) {
  if (cudnnBackendExecute(gpu.cudnn(), plan, pack) != CUDNN_STATUS_SUCCESS) return std::numeric_limits<float>::infinity();
  StepTimer timer(true, gpu.stream());  // its events are destroyed with it, also when an execution throws
  for (int i = 0; i < kFindRuns; ++i) {
    timer.start();
    CUDNN_CHECK(cudnnBackendExecute(gpu.cudnn(), plan, pack), where);
    timer.stop();
  }
  std::vector<double> ms = timer.elapsed_ms();
  std::nth_element(ms.begin(), ms.begin() + kFindRuns / 2, ms.end());
  return static_cast<float>(ms[kFindRuns / 2]);
}

}  // namespace

BackendDescriptor::BackendDescriptor(cudnnBackendDescriptorType_t type, const std::string& where) {
  CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_), where);
}

BackendDescriptor::~BackendDescriptor() {
  if (d_) cudnnBackendDestroyDescriptor(d_);
}

BackendDescriptor& BackendDescriptor::operator=(BackendDescriptor&& o) noexcept {
  if (this != &o) {
    if (d_) cudnnBackendDestroyDescriptor(d_);
    d_ = o.d_;
    o.d_ = nullptr;
  }
  return *this;
}

ConvForwardPlan::ConvForwardPlan(Gpu& gpu, const ConvGeometry& g, const float* x, const float* w, float* y,
                                 const std::string& layer)
    : layer_(layer) {
  const std::string where = layer + " forward (" + g.in.str() + ")";
  tensors_[0] = tensor(kX, {g.in.n, g.in.c, g.in.h, g.in.w}, where);
  tensors_[1] = tensor(kW, {g.out.c, g.in.c, g.kernel, g.kernel}, where);
  tensors_[2] = tensor(kY, {g.out.n, g.out.c, g.out.h, g.out.w}, where);

  conv_ = BackendDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, where);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;  // as torch's conv2d
  const int64_t spatial = 2, padding[2] = {g.padding, g.padding}, stride[2] = {g.stride, g.stride},
                dilation[2] = {1, 1};
  set(conv_.get(), CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, where);
  set(conv_.get(), CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, where);
  set(conv_.get(), CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial, where);
  set(conv_.get(), CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation, where);
  set(conv_.get(), CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride, where);
  set(conv_.get(), CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, padding, where);
  set(conv_.get(), CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, padding, where);
  CUDNN_CHECK(cudnnBackendFinalize(conv_.get()), where);

  op_ = BackendDescriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, where);
  cudnnBackendDescriptor_t xd = tensors_[0].get(), wd = tensors_[1].get(), yd = tensors_[2].get(), cd = conv_.get();
  const float alpha = 1.0f, beta = 0.0f;
  set(op_.get(), CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &xd, where);
  set(op_.get(), CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &wd, where);
  set(op_.get(), CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &yd, where);
  set(op_.get(), CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd, where);
  set(op_.get(), CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha, where);
  set(op_.get(), CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta, where);
  CUDNN_CHECK(cudnnBackendFinalize(op_.get()), where);

  graph_ = BackendDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, where);
  cudnnBackendDescriptor_t op = op_.get();
  cudnnHandle_t handle = gpu.cudnn();
  set(graph_.get(), CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op, where);
  set(graph_.get(), CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, where);
  CUDNN_CHECK(cudnnBackendFinalize(graph_.get()), where);

  // candidates: the instant heuristics' list, then the fallback list
  const ConvSettings& s = gpu.settings();
  std::vector<BackendDescriptor> configs = engine_configs(graph_.get(), CUDNN_HEUR_MODE_INSTANT, where);
  for (auto& c : engine_configs(graph_.get(), CUDNN_HEUR_MODE_FALLBACK, where)) configs.push_back(std::move(c));
  float best_ms = std::numeric_limits<float>::infinity();
  for (BackendDescriptor& config : configs) {
    const Engine engine = engine_of(config.get(), s.tf32, where);
    if (!engine.allowed) continue;
    BackendDescriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, where);
    cudnnBackendDescriptor_t c = config.get();
    set(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, where);
    set(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, where);
    if (cudnnBackendFinalize(plan.get()) != CUDNN_STATUS_SUCCESS) continue;  // not for this shape or GPU
    int64_t bytes = 0, n = 0;
    CUDNN_CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                         &n, &bytes),
                where);
    if (static_cast<size_t>(bytes) > s.workspace_limit_bytes) continue;
    if (!s.find) {
      plan_ = std::move(plan), config_ = std::move(config), workspace_bytes_ = bytes, engine_ = engine.index;
      break;
    }
    const void* pointers[4] = {x, w, y, gpu.workspace(static_cast<size_t>(bytes), layer)};
    const BackendDescriptor pack = variant_pack(pointers, where);
    const float ms = time_plan(gpu, plan.get(), pack.get(), where);
    if (ms < best_ms) {
      best_ms = ms;
      plan_ = std::move(plan), config_ = std::move(config), workspace_bytes_ = bytes, engine_ = engine.index;
    }
  }
  if (!plan_.get())
    throw GpuError(where + ": none of cuDNN's " + std::to_string(configs.size()) +
                   " engine configurations (instant heuristics, then fallback) runs within --workspace-limit-mib " +
                   std::to_string(s.workspace_limit_bytes >> 20) + (s.tf32 ? "" : " without tensor cores (TF32 off)"));
}

void ConvForwardPlan::run(Gpu& gpu, const float* x, const float* w, float* y, void* workspace) {
  const void* pointers[4] = {x, w, y, workspace};
  if (!pack_.get() || !std::equal(pointers, pointers + 4, bound_)) {
    pack_ = variant_pack(pointers, layer_);
    std::copy(pointers, pointers + 4, bound_);
  }
  CUDNN_CHECK(cudnnBackendExecute(gpu.cudnn(), plan_.get(), pack_.get()), layer_);
}

}  // namespace ac::cudnn
