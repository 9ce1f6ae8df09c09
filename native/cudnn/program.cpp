#include "program.h"

#include "kernels.h"

namespace ac::cudnn {

ConvSettings conv_settings(const Args& a) {
  ConvSettings s;
  s.tf32 = a.boolean("tf32");
  const std::string algo = a.str("conv-algo");
  if (algo != "heuristic" && algo != "find")
    throw ArgError("--conv-algo: '" + algo + "' is not one of heuristic, find");
  s.find = algo == "find";
  const int64_t mib = a.integer("workspace-limit-mib");
  if (mib < 0) throw ArgError("--workspace-limit-mib must be >= 0, got " + std::to_string(mib));
  s.workspace_limit_bytes = static_cast<size_t>(mib) << 20;
  return s;
}

Normaliser::Normaliser(const std::vector<double>& mean, const std::vector<double>& std, int channels)
    : channels_(channels), mean_host_(mean.begin(), mean.end()), std_host_(std.begin(), std.end()) {
  if (static_cast<int>(mean.size()) != channels || static_cast<int>(std.size()) != channels)
    throw ArgError("--mean/--std: need " + std::to_string(channels) + " values each, got " +
                   std::to_string(mean.size()) + " and " + std::to_string(std.size()));
}

void Normaliser::upload() {
  mean_ = Buffer<float>(channels_, "normalisation mean");
  std_ = Buffer<float>(channels_, "normalisation std");
  CUDA_CHECK(cudaMemcpy(mean_.get(), mean_host_.data(), channels_ * sizeof(float), cudaMemcpyHostToDevice),
             "normalisation");
  CUDA_CHECK(cudaMemcpy(std_.get(), std_host_.data(), channels_ * sizeof(float), cudaMemcpyHostToDevice),
             "normalisation");
}

void Normaliser::operator()(Gpu& gpu, const uint8_t* images, float* x, int n, int64_t hw) const {
  normalise_u8(images, x, n, channels_, hw, mean_.get(), std_.get(), gpu.stream());
}

namespace {

const std::string& checked(const ParameterSet& params, const std::vector<NamedTensor>& weights,
                           const std::string& weights_path, const std::string& device) {
  params.check(weights, weights_path);
  return device;
}

}  // namespace

LoadedNetwork::LoadedNetwork(const std::vector<NamedTensor>& weights, const std::string& weights_path, int channels,
                             int classes, const std::string& device, ConvSettings settings, bool for_training,
                             Normaliser& normalise)
    : net(params, channels, classes), gpu(checked(params, weights, weights_path, device), settings) {
  params.allocate(for_training);
  params.upload(weights);
  normalise.upload();
  // the uploads ran on the legacy default stream, which the program's non-blocking stream does not wait for
  CUDA_CHECK(cudaDeviceSynchronize(), "weights upload");
}

GraphReplay::~GraphReplay() {
  for (auto& [n, exec] : execs_) cudaGraphExecDestroy(exec);
  for (auto& [n, graph] : graphs_) cudaGraphDestroy(graph);
}

void GraphReplay::run(Gpu& gpu, int n, const std::function<void()>& step) {
  const int seen = enabled_ ? runs_[n]++ : 0;
  if (seen == 0) {
    step();
    return;
  }
  if (execs_.count(n) && generation_[n] != gpu.workspace_generation()) {
    cudaGraphExecDestroy(execs_[n]);
    cudaGraphDestroy(graphs_[n]);
    execs_.erase(n);
    graphs_.erase(n);
  }
  if (!execs_.count(n)) {
    const std::string where = "CUDA graph of the step at batch " + std::to_string(n);
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(gpu.stream(), cudaStreamCaptureModeThreadLocal), where);
    try {
      step();
    } catch (...) {
      cudaStreamEndCapture(gpu.stream(), &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    CUDA_CHECK(cudaStreamEndCapture(gpu.stream(), &graph), where);
    graphs_[n] = graph;
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0), where);
    execs_[n] = exec;
    generation_[n] = gpu.workspace_generation();
  }
  CUDA_CHECK(cudaGraphLaunch(execs_[n], gpu.stream()), "CUDA graph launch");
}

void emit_start(const Gpu& gpu, const std::string& subcommand) {
  int cublas_version = 0;
  cublasGetVersion(gpu.cublas(), &cublas_version);
  Record r("start");
  r.add("subcommand", subcommand).add("monotonic_s", monotonic_s()).add("device", gpu.device_name())
      .add("cudnn_version", static_cast<int64_t>(cudnnGetVersion()))
      .add("cublas_version", static_cast<int64_t>(cublas_version)).add("tf32", gpu.settings().tf32);
  Phase::describe_algorithms(r, gpu);
  r.emit();
}

}  // namespace ac::cudnn
