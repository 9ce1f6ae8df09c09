// ac_cudnn <train|eval|sweep> --flag value ...
// Records go to stdout as JSON lines; a failure becomes a last record {"kind": "error", "status": "error" | "oom",
// "message": ...} and a non-zero exit code (1 error, 2 usage, 3 out of memory), as ac_libtorch's.
#include <iostream>
#include <string>

#include "jsonl.h"
#include "program.h"

namespace {

constexpr const char* kUsage =
    "usage: ac_cudnn train --flag value ...   (flags: native/cudnn/train.cpp)\n"
    "       ac_cudnn eval --flag value ...    (flags: native/cudnn/eval.cpp)\n"
    "       ac_cudnn sweep --flag value ...   (flags: native/cudnn/sweep.cpp, native/common/sweep.h)\n";

int fail(const std::string& status, const std::string& message, int code) {
  ac::Record("error").add("status", status).add("message", message).emit();
  std::cerr << "ac_cudnn: " << status << ": " << message << std::endl;
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string subcommand = argv[1];
  try {
    const ac::Args args(argc, argv, 2);
    if (subcommand == "train") return ac::cudnn::train_main(args);
    if (subcommand == "eval") return ac::cudnn::eval_main(args);
    if (subcommand == "sweep") return ac::cudnn::sweep_main(args);
    std::cerr << kUsage;
    return fail("error", "unknown subcommand '" + subcommand + "'", 2);
  } catch (const ac::ArgError& e) {
    return fail("error", e.what(), 2);
  } catch (const ac::cudnn::OutOfMemory& e) {
    return fail("oom", e.what(), 3);
  } catch (const std::exception& e) {
    return fail("error", e.what(), 1);
  }
}
