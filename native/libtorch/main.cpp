// ac_libtorch <train|eval|sweep> --flag value ...: records and exit codes in native/common/subcommands.h; torch's
// errors are reported without their C++ backtrace.
#include <c10/util/Exception.h>

#include "programs.h"
#include "subcommands.h"

int main(int argc, char** argv) {
  return ac::run_subcommand(
      "ac_libtorch",
      "usage: ac_libtorch train --flag value ...   (flags: native/libtorch/train.cpp)\n"
      "       ac_libtorch eval --flag value ...    (flags: native/libtorch/eval.cpp)\n"
      "       ac_libtorch sweep --flag value ...   (flags: native/libtorch/sweep.cpp, native/common/sweep.h)\n",
      argc, argv, {{"train", ac::train_main}, {"eval", ac::eval_main}, {"sweep", ac::sweep_main}},
      [](const std::exception& e) -> std::optional<ac::Failure> {
        if (const auto* oom = dynamic_cast<const c10::OutOfMemoryError*>(&e))
          return ac::Failure{"oom", oom->what_without_backtrace(), 3};
        if (const auto* error = dynamic_cast<const c10::Error*>(&e))
          return ac::Failure{"error", error->what_without_backtrace(), 1};
        return std::nullopt;
      });
}
