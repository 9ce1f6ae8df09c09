// Command-line flags: `--name value` pairs after a subcommand. Every value a program reads is named, so an
// error says which flag is missing or malformed; flags nobody read are reported as unknown.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ac {

class ArgError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The items of a comma-separated value ("8,16,32"; an environment variable's "oom@1,crash@3").
inline std::vector<std::string> comma_items(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

class Args {
 public:
  Args(int argc, char** argv, int first) {
    for (int i = first; i < argc; ++i) {
      std::string key = argv[i];
      if (key.rfind("--", 0) != 0) throw ArgError("expected a --flag, got '" + key + "'");
      if (i + 1 >= argc) throw ArgError("flag " + key + " has no value");
      std::string name = key.substr(2);
      if (values_.count(name)) throw ArgError("flag " + key + " given twice");
      values_[name] = argv[++i];
    }
  }

  bool has(const std::string& name) const { return values_.count(name) > 0; }

  std::string str(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) throw ArgError("missing flag --" + name);
    used_.insert(name);
    return it->second;
  }

  std::string str(const std::string& name, const std::string& fallback) const {
    return has(name) ? str(name) : fallback;
  }

  int64_t integer(const std::string& name) const {
    const std::string v = str(name);
    try {
      size_t end = 0;
      int64_t x = std::stoll(v, &end);
      if (end == v.size()) return x;
    } catch (const std::exception&) {
    }
    throw ArgError("flag --" + name + ": '" + v + "' is not an integer");
  }

  int64_t integer(const std::string& name, int64_t fallback) const {
    return has(name) ? integer(name) : fallback;
  }

  double number(const std::string& name) const { return parse_number(name, str(name)); }

  double number(const std::string& name, double fallback) const { return has(name) ? number(name) : fallback; }

  bool boolean(const std::string& name) const {
    const std::string v = str(name);
    if (v == "1" || v == "true") return true;
    if (v == "0" || v == "false") return false;
    throw ArgError("flag --" + name + ": '" + v + "' is not 0/1/true/false");
  }

  // A comma-separated list of numbers, e.g. --mean 0.48,0.45,0.40
  std::vector<double> numbers(const std::string& name) const {
    std::vector<double> out;
    for (const std::string& item : comma_items(str(name))) out.push_back(parse_number(name, item));
    return out;
  }

  // Call after reading every flag: a flag that was given but never read is a typo or a stale launcher.
  void reject_unused() const {
    std::string unknown;
    for (const auto& [name, value] : values_)
      if (!used_.count(name)) unknown += (unknown.empty() ? "--" : ", --") + name;
    if (!unknown.empty()) throw ArgError("unknown flag(s): " + unknown);
  }

 private:
  static double parse_number(const std::string& name, const std::string& v) {
    try {
      size_t end = 0;
      double x = std::stod(v, &end);
      if (end == v.size()) return x;
    } catch (const std::exception&) {
    }
    throw ArgError("flag --" + name + ": '" + v + "' is not a number");
  }

  std::map<std::string, std::string> values_;
  mutable std::set<std::string> used_;
};

}  // namespace ac
