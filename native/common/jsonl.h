// JSON-lines records: one object per line on stdout, flushed at once so the launcher sees each record as it is
// written (and keeps the finished ones if the program dies later). Field names are the tables' column names.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace ac {

class Record {
 public:
  explicit Record(const std::string& kind) { add("kind", kind); }

  Record& add(const std::string& key, const std::string& v) { return field(key, quote(v)); }
  Record& add(const std::string& key, const char* v) { return add(key, std::string(v)); }
  Record& add(const std::string& key, bool v) { return field(key, v ? "true" : "false"); }
  Record& add(const std::string& key, int64_t v) { return field(key, std::to_string(v)); }
  Record& add(const std::string& key, int v) { return add(key, static_cast<int64_t>(v)); }
  Record& add(const std::string& key, double v) { return field(key, number(v)); }
  Record& add(const std::string& key, std::optional<double> v) { return field(key, v ? number(*v) : "null"); }
  Record& add(const std::string& key, const std::vector<double>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + number(v[i]);
    return field(key, s + "]");
  }

  std::string str() const { return body_ + "}"; }

  // Writes the record as one line and flushes.
  void emit(std::ostream& out = std::cout) const {
    out << str() << '\n';
    out.flush();
  }

  static std::string quote(const std::string& v) {
    std::string s = "\"";
    for (unsigned char c : v) {
      switch (c) {
        case '"': s += "\\\""; break;
        case '\\': s += "\\\\"; break;
        case '\n': s += "\\n"; break;
        case '\r': s += "\\r"; break;
        case '\t': s += "\\t"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            s += buf;
          } else {
            s += static_cast<char>(c);
          }
      }
    }
    return s + "\"";
  }

  // Text that reads back as exactly the same double (17 significant digits). NaN and infinities are written as
  // Python's json module writes and reads them (NaN, Infinity, -Infinity), so that a diverged loss stays NaN in
  // the tables, as eager's does, instead of turning into a null.
  static std::string number(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
  }

 private:
  Record& field(const std::string& key, const std::string& value) {
    body_ += (body_.size() > 1 ? "," : "") + quote(key) + ":" + value;
    return *this;
  }

  std::string body_ = "{";
};

}  // namespace ac
