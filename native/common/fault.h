// Fault hooks for the fault suite (tests/faults): AC_FAULT, a comma-separated list of items site:what@where, in
// the grammar and with the sites of src/abstraction_cost/faults.py, which documents each. A program acts on its
// own sites (phase: segv, exit as a phase starts; cell: oom, crash, wrong in the sweep, sweep.h) and checks every
// item: a malformed one is an ArgError naming AC_FAULT and the item. Unset, a hook costs one getenv.
#pragma once

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "args.h"

namespace ac {

struct Fault {
  std::string what;
  std::string where;
};

namespace fault_detail {

// site -> what may happen there; faults.py's SITES, the same table
inline const std::vector<std::pair<std::string, std::vector<std::string>>>& sites() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> table = {
      {"table", {"kill", "enospc"}},
      {"phase", {"oom", "segv", "exit"}},
      {"compile", {"error", "recompile-limit"}},
      {"eval", {"oom", "segv", "kill"}},
      {"cell", {"oom", "crash", "wrong", "kill"}}};
  return table;
}

inline bool known(const std::string& site, const std::string& what) {
  for (const auto& [s, whats] : sites())
    if (s == site)
      for (const std::string& w : whats)
        if (w == what) return true;
  return false;
}

inline std::string grammar() {
  std::string out;
  for (const auto& [site, whats] : sites()) {
    out += (out.empty() ? "" : ", ") + site + ":";
    for (size_t i = 0; i < whats.size(); ++i) out += (i ? "|" : "") + whats[i];
  }
  return out + " (a cell's where is its index)";
}

}  // namespace fault_detail

// AC_FAULT's items at `site`, in their order; every item checked.
inline std::vector<Fault> faults_at(const std::string& site) {
  std::vector<Fault> out;
  const char* env = std::getenv("AC_FAULT");
  if (env == nullptr) return out;
  for (const std::string& item : comma_items(env)) {
    if (item.empty()) continue;
    const size_t colon = item.find(':'), at = item.find('@', colon == std::string::npos ? 0 : colon);
    const std::string s = item.substr(0, colon);
    const std::string what = colon == std::string::npos || at == std::string::npos
                                 ? "" : item.substr(colon + 1, at - colon - 1);
    const std::string where = at == std::string::npos ? "" : item.substr(at + 1);
    const bool index = !where.empty() && where.find_first_not_of("0123456789") == std::string::npos;
    if (!fault_detail::known(s, what) || where.empty() || (s == "cell" && !index))
      throw ArgError("AC_FAULT: '" + item + "' is not site:what@where; " + fault_detail::grammar());
    if (s == site) out.push_back({what, where});
  }
  return out;
}

// phase:segv@<phase>-<epoch> crashes the program with SIGSEGV, phase:exit@... exits with status 3, as it starts
// that phase (e.g. train-1): the suite shows that a crash mid-run keeps the finished phases' rows.
inline void fault_point(const char* phase, long long epoch) {
  if (std::getenv("AC_FAULT") == nullptr) return;
  const std::string here = std::string(phase) + "-" + std::to_string(epoch);
  for (const Fault& f : faults_at("phase")) {
    if (f.where != here) continue;
    if (f.what == "segv") {
      std::fprintf(stderr, "AC_FAULT: SIGSEGV at %s\n", here.c_str());
      std::raise(SIGSEGV);
    }
    if (f.what == "exit") {
      std::fprintf(stderr, "AC_FAULT: exiting with status 3 at %s\n", here.c_str());
      std::exit(3);
    }
  }
}

}  // namespace ac
