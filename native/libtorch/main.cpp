// ac_libtorch <train|eval|sweep> --flag value ...
// Records go to stdout as JSON lines; a failure becomes a last record {"kind": "error", "status": "error" | "oom",
// "message": ...} and a non-zero exit code (1 error, 2 usage, 3 out of memory), so the launcher can write rows
// with that status and message even when no phase finished.
#include <c10/util/Exception.h>

#include <iostream>
#include <string>

#include "jsonl.h"
#include "programs.h"

namespace {

constexpr const char* kUsage =
    "usage: ac_libtorch train --flag value ...   (flags: native/libtorch/train.cpp)\n"
    "       ac_libtorch eval --flag value ...    (flags: native/libtorch/eval.cpp)\n"
    "       ac_libtorch sweep --flag value ...   (flags: native/libtorch/sweep.cpp, native/common/sweep.h)\n";

int fail(const std::string& status, const std::string& message, int code) {
  ac::Record("error").add("status", status).add("message", message).emit();
  std::cerr << "ac_libtorch: " << status << ": " << message << std::endl;
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
    if (subcommand == "train") return ac::train_main(args);
    if (subcommand == "eval") return ac::eval_main(args);
    if (subcommand == "sweep") return ac::sweep_main(args);
    std::cerr << kUsage;
    return fail("error", "unknown subcommand '" + subcommand + "'", 2);
  } catch (const ac::ArgError& e) {
    return fail("error", e.what(), 2);
  } catch (const c10::OutOfMemoryError& e) {
    return fail("oom", e.what_without_backtrace(), 3);
  } catch (const c10::Error& e) {
    return fail("error", e.what_without_backtrace(), 1);
  } catch (const std::exception& e) {
    return fail("error", e.what(), 1);
  }
}
