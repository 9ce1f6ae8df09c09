// ac_cudnn eval: timed evaluation of one batch, for Study A's backend comparison and benchmarks.
//   --model cudnn          each call runs layer by layer (cuDNN, cuBLAS and own kernels on one stream)
//   --model cudnn-graphs   normalisation and forward captured once as a CUDA graph, each call replays it
// Input: the first --batch-size images of --images (uint8, --count × --channels × --height × --width), normalised
// with --mean/--std on the device; --weights FILE --classes N; running statistics (eval mode).
// Timing as ac_libtorch eval: --warmup untimed calls, then --repeats calls, each synchronised before it starts and
// timed from before the host-to-device copy to the logits. One `eval` record (with conv_algo, workspace_mib);
// with --logits-out FILE the last call's logits (float32, batch × classes, C order).
// Numerics and algorithms: --device cuda[:N] --tf32 0|1 --conv-algo heuristic|find --workspace-limit-mib N.
#include <cstdio>
#include <fstream>

#include "fault.h"
#include "parameters.h"
#include "prepared.h"
#include "program.h"
#include "resnet.h"

namespace ac::cudnn {
namespace {

void write_logits(const std::string& path, const std::vector<float>& logits) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * 4));
    if (!out.flush()) throw std::runtime_error(path + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error(path + ": cannot rename " + tmp);
}

}  // namespace

int eval_main(const Args& a) {
  const std::string device = a.str("device");
  const ConvSettings settings = conv_settings(a);
  const std::string model = a.str("model");
  if (model != "cudnn" && model != "cudnn-graphs")
    throw ArgError("--model: '" + model + "' is not one of cudnn, cudnn-graphs");
  const int channels = static_cast<int>(a.integer("channels")), height = static_cast<int>(a.integer("height"));
  const int width = static_cast<int>(a.integer("width")), classes = static_cast<int>(a.integer("classes"));
  const int64_t count = a.integer("count"), batch_size = a.integer("batch-size");
  const int64_t warmup = a.integer("warmup"), repeats = a.integer("repeats");
  if (batch_size < 1 || batch_size > count)
    throw ArgError("--batch-size " + std::to_string(batch_size) + " must be in 1..--count (" +
                   std::to_string(count) + ")");
  if (warmup < 0 || repeats < 1) throw ArgError("--warmup must be >= 0 and --repeats >= 1");
  if (channels < 1 || height < 1 || width < 1 || classes < 1)
    throw ArgError("--channels, --height, --width and --classes must be at least 1");
  const int64_t image_bytes = int64_t{channels} * height * width;
  std::vector<uint8_t> images = read_exact<uint8_t>(a.str("images"), count * image_bytes);
  images.resize(batch_size * image_bytes);
  Normaliser normalise(a.numbers("mean"), a.numbers("std"), channels);
  const std::string logits_path = a.str("logits-out", "");
  const std::string weights_path = a.str("weights");
  a.reject_unused();

  const double load_start = monotonic_s();
  const std::vector<NamedTensor> weights = read_weights(weights_path);
  LoadedNetwork loaded(weights, weights_path, channels, classes, device, settings, /*for_training=*/false,
                       normalise);
  Gpu& gpu = loaded.gpu;
  ResNet50& net = loaded.net;
  const int n = static_cast<int>(batch_size);
  net.reserve({.inference = n}, height, width);
  Buffer<uint8_t> images_dev(images.size(), "input batch (uint8)");
  Buffer<float> x(images.size(), "input batch (float)");
  const float* logits = nullptr;
  GraphReplay replay(model == "cudnn-graphs");
  const auto forward = [&] {
    normalise(gpu, images_dev.get(), x.get(), n, int64_t{height} * width);
    logits = net.forward(gpu, x.get(), n, false);
  };
  const auto call = [&] {
    CUDA_CHECK(cudaMemcpyAsync(images_dev.get(), images.data(), images.size(), cudaMemcpyHostToDevice,
                               gpu.stream()),
               "input copy");
    replay.run(gpu, n, forward);
  };
  if (replay.enabled()) {  // algorithms, workspace and the graph are made here, outside the timed calls
    call();
    call();
    gpu.synchronize("graph capture");
  }
  const double load_s = monotonic_s() - load_start;
  emit_start(gpu, "eval");
  fault_point("backend_eval", 0);  // tests/faults: AC_FAULT=segv@backend_eval-0 crashes here

  Phase phase;
  for (int64_t i = 0; i < warmup; ++i) call();
  StepTimer timer(true, gpu.stream());
  for (int64_t i = 0; i < repeats; ++i) {
    gpu.synchronize("eval");
    timer.start();
    call();
    timer.stop();
  }
  const std::vector<double> times = timer.elapsed_ms();
  phase.finish(gpu);
  if (!logits_path.empty()) {
    std::vector<float> host(static_cast<size_t>(n) * classes);
    CUDA_CHECK(cudaMemcpy(host.data(), logits, host.size() * sizeof(float), cudaMemcpyDeviceToHost), "logits");
    write_logits(logits_path, host);
  }

  Record r("eval");
  r.add("model", model).add("batch_size", batch_size).add("warmup", warmup).add("repeats", repeats)
      .add("classes", static_cast<int64_t>(classes)).add("load_s", load_s).add("times_ms", times);
  phase.describe(r, gpu);
  r.emit();
  return 0;
}

}  // namespace ac::cudnn
