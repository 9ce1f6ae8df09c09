// The subcommands of ac_libtorch. Each writes JSON-lines records to stdout (kinds: start, step, phase, eval,
// error) and returns the process exit code; main.cpp turns exceptions into an `error` record.
#pragma once

#include "args.h"

namespace ac {

// ResNet-50 in torch::nn, trained and evaluated exactly as study_a/eager.py does (see train.cpp).
int train_main(const Args& args);

// Timed evaluation of one model (torch::nn, TorchScript or an AOTInductor package) on one batch (see eval.cpp).
int eval_main(const Args& args);

// Study A's inference sweep of one model over batch × resolution for one transfer mode (see sweep.cpp).
int sweep_main(const Args& args);

}  // namespace ac
