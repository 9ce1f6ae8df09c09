// What the subcommands of ac_cudnn share: the flags for numerics and convolution algorithms, the input
// normalisation, the network loaded onto the GPU, CUDA-graph replay of a step, the phase records, and the
// subcommands themselves. Records and
// flags are ac_libtorch's (native/libtorch), plus conv_algo and workspace_mib on every record.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "args.h"
#include "gpu.h"
#include "jsonl.h"
#include "parameters.h"
#include "resnet.h"
#include "timer.h"
#include "weights_file.h"

namespace ac::cudnn {

// ResNet-50 trained and evaluated with eager's semantics (train.cpp).
int train_main(const Args& args);
// Timed evaluation of one batch, plain or replayed as a CUDA graph (eval.cpp).
int eval_main(const Args& args);
// Study A's inference sweep over batch × resolution for one input transfer mode (sweep.cpp, native/common/sweep.h).
int sweep_main(const Args& args);

// --tf32 0|1, --conv-algo heuristic|find, --workspace-limit-mib N.
ConvSettings conv_settings(const Args& args);

// uint8 batches on the device -> normalised float32 (kernels.h's normalise_u8).
class Normaliser {
 public:
  Normaliser(const std::vector<double>& mean, const std::vector<double>& std, int channels);
  void upload();  // once the GPU is open
  void operator()(Gpu& gpu, const uint8_t* images, float* x, int n, int64_t hw) const;

 private:
  int channels_;
  std::vector<float> mean_host_, std_host_;
  Buffer<float> mean_, std_;
};

// The network with its weights on the GPU, as every subcommand starts: the weights are checked against the network
// before the GPU opens (a wrong file is named on any machine), then the parameters (with gradients and momentum
// for training) are allocated and uploaded, and the normalisation's constants with them.
struct LoadedNetwork {
  LoadedNetwork(const std::vector<NamedTensor>& weights, const std::string& weights_path, int channels, int classes,
                const std::string& device, ConvSettings settings, bool for_training, Normaliser& normalise);

  ParameterSet params;
  ResNet50 net;
  Gpu gpu;  // declared last: destroyed before the buffers above are freed, as the CUDA context outlives both
};

// Runs a step of batch n on the stream: directly the first time for that n (algorithm choice and workspace growth
// happen then, outside any capture), captured into a CUDA graph the second time, replayed from then on. Without
// `enabled` it always runs directly. A graph captured before the convolution workspace moved is captured again.
class GraphReplay {
 public:
  explicit GraphReplay(bool enabled) : enabled_(enabled) {}
  ~GraphReplay();
  GraphReplay(const GraphReplay&) = delete;
  GraphReplay& operator=(const GraphReplay&) = delete;

  void run(Gpu& gpu, int n, const std::function<void()>& step);
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  std::map<int, int> runs_;
  std::map<int, cudaGraph_t> graphs_;
  std::map<int, cudaGraphExec_t> execs_;
  std::map<int, uint64_t> generation_;  // the workspace generation each graph was captured with
};

// A phase on the launcher's CLOCK_MONOTONIC timeline, with this program's device-allocation peak inside it.
struct Phase {
  double start_s = 0, end_s = 0;

  Phase() {
    DeviceBytes::reset_peak();
    start_s = monotonic_s();
  }
  void finish(const Gpu& gpu) {
    gpu.synchronize("end of phase");
    end_s = monotonic_s();
  }
  void describe(Record& r, const Gpu& gpu) const {
    r.add("start_monotonic_s", start_s).add("end_monotonic_s", end_s).add("wall_s", end_s - start_s)
        .add("alloc_peak_mib", DeviceBytes::peak_mib());
    describe_algorithms(r, gpu);
  }
  static void describe_algorithms(Record& r, const Gpu& gpu) {
    r.add("conv_algo", gpu.settings().algo_name()).add("workspace_mib", gpu.workspace_mib());
  }
};

// The first record: device, library versions, and the time now on CLOCK_MONOTONIC.
void emit_start(const Gpu& gpu, const std::string& subcommand);

}  // namespace ac::cudnn
