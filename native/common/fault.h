// Test hook for the fault suite (tests/faults): AC_FAULT=segv@<phase>-<epoch> or exit@<phase>-<epoch> makes a
// program crash with SIGSEGV, or exit with status 3, as it starts that phase (e.g. segv@train-1). Unset, it costs
// one getenv per phase. It exists so the suite can show that a crash mid-run keeps the finished phases' rows.
#pragma once

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ac {

inline void fault_point(const char* phase, long long epoch) {
  const char* wanted = std::getenv("AC_FAULT");
  if (wanted == nullptr) return;
  const std::string at = std::string(phase) + "-" + std::to_string(epoch);
  const std::string spec(wanted);
  if (spec == "segv@" + at) {
    std::fprintf(stderr, "AC_FAULT: SIGSEGV at %s\n", at.c_str());
    std::raise(SIGSEGV);
  }
  if (spec == "exit@" + at) {
    std::fprintf(stderr, "AC_FAULT: exiting with status 3 at %s\n", at.c_str());
    std::exit(3);
  }
}

}  // namespace ac
