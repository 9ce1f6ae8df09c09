// The main() of the C++ programs (ac_libtorch, ac_cudnn): `<program> <subcommand> --flag value ...`, records on
// stdout as JSON lines. A failure becomes a last record {"kind": "error", "status": "error" | "oom", "message": ...}
// and a non-zero exit code (1 error, 2 usage, 3 out of memory), so the launcher can write rows with that status and
// message even when no phase finished.
#pragma once

#include <exception>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "args.h"
#include "jsonl.h"

namespace ac {

using Subcommand = int (*)(const Args&);

// What a program makes of an exception its subcommand threw, where it knows better than "error", what(), exit 1.
struct Failure {
  std::string status;
  std::string message;
  int code;
};
using Classify = std::function<std::optional<Failure>(const std::exception&)>;

inline int run_subcommand(const std::string& program, const std::string& usage, int argc, char** argv,
                          const std::vector<std::pair<std::string, Subcommand>>& subcommands,
                          const Classify& classify) {
  const auto fail = [&](const Failure& f) {
    Record("error").add("status", f.status).add("message", f.message).emit();
    std::cerr << program << ": " << f.status << ": " << f.message << std::endl;
    return f.code;
  };
  if (argc < 2) {
    std::cerr << usage;
    return 2;
  }
  const std::string name = argv[1];
  try {
    const Args args(argc, argv, 2);
    for (const auto& [subcommand, main] : subcommands)
      if (subcommand == name) return main(args);
    std::cerr << usage;
    return fail({"error", "unknown subcommand '" + name + "'", 2});
  } catch (const ArgError& e) {
    return fail({"error", e.what(), 2});
  } catch (const std::exception& e) {
    return fail(classify(e).value_or(Failure{"error", e.what(), 1}));
  }
}

}  // namespace ac
