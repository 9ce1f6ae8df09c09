// ac_libtorch eval: timed evaluation of one model on one batch, for the backend comparison of Study A.
//   --model libtorch      ResNet-50 in torch::nn (resnet.cpp) with --weights FILE --classes N
//   --model torchscript   a module saved by torch.jit.script/trace, loaded with torch::jit::load (--module FILE)
//   --model aoti          a torch.export + AOTInductor package (--module FILE.pt2), AOTIModelPackageLoader
// Input: the first --batch-size images of --images (uint8, --count × --channels × --height × --width), normalised
// with --mean/--std on the device, as every backend does. The model is in eval mode, without gradients.
// Timing (as measure/timing.py's benchmark()): --warmup untimed calls, then --repeats calls, each synchronised
// before it starts and timed from before the host-to-device copy to the logits. One `eval` record; with
// --logits-out FILE the last call's logits are written there (float32, batch × classes, C order) for parity.
#include <torch/script.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>

#include "fault.h"
#include "models.h"
#include "prepared.h"
#include "programs.h"
#include "resnet.h"
#include "runtime.h"
#include "weights_file.h"

namespace ac {

Forward load_model(const std::string& kind, const Args& a, const Session& s, int64_t channels,
                   std::shared_ptr<void>& keep) {
  if (kind == "libtorch") {
    const std::string path = a.str("weights");
    auto model = std::make_shared<ResNet50>(channels, a.integer("classes"));
    load_weights(**model, read_weights(path), path);
    (*model)->to(s.device);
    (*model)->eval();
    keep = model;
    return [model](const torch::Tensor& x) { return (*model)->forward(x); };
  }
  if (kind == "torchscript") {
    auto module = std::make_shared<torch::jit::script::Module>(torch::jit::load(a.str("module"), s.device));
    module->eval();
    keep = module;
    return [module](const torch::Tensor& x) { return module->forward({x}).toTensor(); };
  }
  if (kind == "aoti") {
    auto loader = std::make_shared<torch::inductor::AOTIModelPackageLoader>(a.str("module"));
    keep = loader;
    return [loader](const torch::Tensor& x) {
      std::vector<torch::Tensor> out = loader->run({x});
      if (out.size() != 1) throw std::runtime_error("aoti package returned " + std::to_string(out.size()) +
                                                    " outputs, expected 1 (the logits)");
      return out[0];
    };
  }
  throw ArgError("--model: '" + kind + "' is not one of libtorch, torchscript, aoti");
}

namespace {

void write_logits(const std::string& path, const torch::Tensor& logits) {
  const torch::Tensor cpu = logits.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(cpu.data_ptr<float>()),
              static_cast<std::streamsize>(cpu.numel() * sizeof(float)));
    if (!out.flush()) throw std::runtime_error(path + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error(path + ": cannot rename " + tmp);
}

}  // namespace

int eval_main(const Args& a) {
  const Session session = open_session(a);
  const std::string kind = a.str("model");
  const int64_t channels = a.integer("channels"), height = a.integer("height"), width = a.integer("width");
  const int64_t count = a.integer("count"), batch_size = a.integer("batch-size");
  const int64_t warmup = a.integer("warmup"), repeats = a.integer("repeats");
  if (batch_size < 1 || batch_size > count)
    throw ArgError("--batch-size " + std::to_string(batch_size) + " must be in 1..--count (" +
                   std::to_string(count) + ")");
  if (warmup < 0 || repeats < 1) throw ArgError("--warmup must be >= 0 and --repeats >= 1");
  std::vector<uint8_t> images = read_exact<uint8_t>(a.str("images"), count * channels * height * width);
  const Normaliser normalise(a.numbers("mean"), a.numbers("std"), channels, session.device);
  const std::string logits_path = a.str("logits-out", "");

  const double load_start = monotonic_s();
  std::shared_ptr<void> keep;
  const Forward forward = load_model(kind, a, session, channels, keep);
  const double load_s = monotonic_s() - load_start;
  a.reject_unused();
  emit_start(session, "eval");
  fault_point("backend_eval", 0);  // tests/faults: AC_FAULT=segv@backend_eval-0 crashes here

  const torch::Tensor batch = torch::from_blob(images.data(), {batch_size, channels, height, width}, torch::kUInt8);
  torch::NoGradGuard no_grad;
  Phase phase(session);
  for (int64_t i = 0; i < warmup; ++i) forward(normalise(batch));
  StepTimer timer(session.cuda(), session.stream());
  torch::Tensor logits;
  for (int64_t i = 0; i < repeats; ++i) {
    session.synchronize();
    timer.start();
    logits = forward(normalise(batch));
    timer.stop();
  }
  const std::vector<double> times = timer.elapsed_ms();
  phase.finish();
  if (!logits_path.empty()) write_logits(logits_path, logits);

  Record r("eval");
  r.add("model", kind).add("batch_size", batch_size).add("warmup", warmup).add("repeats", repeats)
      .add("classes", logits.size(1)).add("load_s", load_s).add("times_ms", times);
  phase.describe(r);
  r.emit();
  return 0;
}

}  // namespace ac
