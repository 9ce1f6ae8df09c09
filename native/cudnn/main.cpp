// ac_cudnn <train|eval|sweep> --flag value ...: records and exit codes as ac_libtorch's (native/common/subcommands.h).
#include "program.h"
#include "subcommands.h"

int main(int argc, char** argv) {
  return ac::run_subcommand(
      "ac_cudnn",
      "usage: ac_cudnn train --flag value ...   (flags: native/cudnn/train.cpp)\n"
      "       ac_cudnn eval --flag value ...    (flags: native/cudnn/eval.cpp)\n"
      "       ac_cudnn sweep --flag value ...   (flags: native/cudnn/sweep.cpp, native/common/sweep.h)\n",
      argc, argv,
      {{"train", ac::cudnn::train_main}, {"eval", ac::cudnn::eval_main}, {"sweep", ac::cudnn::sweep_main}},
      [](const std::exception& e) -> std::optional<ac::Failure> {
        if (dynamic_cast<const ac::cudnn::OutOfMemory*>(&e)) return ac::Failure{"oom", e.what(), 3};
        return std::nullopt;
      });
}
