// The models ac_libtorch evaluates (eval.cpp and sweep.cpp), loaded from the flags: --model libtorch with --weights
// FILE --classes N (torch::nn, resnet.cpp), torchscript with --module FILE (torch::jit::load), aoti with --module
// FILE.pt2 (AOTIModelPackageLoader).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

#include "args.h"
#include "runtime.h"

namespace ac {

using Forward = std::function<torch::Tensor(const torch::Tensor&)>;

// The model as a forward function on `s.device`, in eval mode; the objects it needs live in `keep`.
Forward load_model(const std::string& kind, const Args& a, const Session& s, int64_t channels,
                   std::shared_ptr<void>& keep);

}  // namespace ac
