// The weights file (layout and rationale: src/abstraction_cost/models/weights_file.py), little-endian:
//   magic "ACWT", uint32 version (1), uint32 count, then count times:
//   uint32 name_len, name (UTF-8 state_dict key), uint32 ndim, int64 shape[ndim], float32 data[prod(shape)]
#pragma once

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace ac {

static_assert(std::endian::native == std::endian::little, "the weights file is little-endian");

inline constexpr char kWeightsMagic[4] = {'A', 'C', 'W', 'T'};
inline constexpr uint32_t kWeightsVersion = 1;

class WeightsFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

inline std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

inline std::vector<NamedTensor> read_weights(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw WeightsFileError(path + ": cannot open");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t offset = 0;
  auto take = [&](void* out, size_t n, const std::string& what) {
    if (offset + n > bytes.size()) throw WeightsFileError(path + ": truncated in " + what);
    std::memcpy(out, bytes.data() + offset, n);
    offset += n;
  };
  char magic[4];
  take(magic, 4, "header");
  if (std::memcmp(magic, kWeightsMagic, 4) != 0) throw WeightsFileError(path + ": not a weights file (bad magic)");
  uint32_t version = 0, count = 0;
  take(&version, 4, "header");
  take(&count, 4, "header");
  if (version != kWeightsVersion)
    throw WeightsFileError(path + ": version " + std::to_string(version) + ", this reader knows " +
                           std::to_string(kWeightsVersion));
  std::vector<NamedTensor> tensors(count);
  for (auto& t : tensors) {
    uint32_t name_len = 0, ndim = 0;
    take(&name_len, 4, "a tensor name");
    t.name.resize(name_len);
    take(t.name.data(), name_len, "a tensor name");
    take(&ndim, 4, "tensor " + t.name);
    t.shape.resize(ndim);
    take(t.shape.data(), 8 * ndim, "tensor " + t.name);
    t.data.resize(static_cast<size_t>(t.numel()));
    take(t.data.data(), 4 * t.data.size(), "tensor " + t.name);
  }
  if (offset != bytes.size())
    throw WeightsFileError(path + ": " + std::to_string(bytes.size() - offset) + " trailing bytes");
  return tensors;
}

// Written to a temporary name and renamed, like every output of the pipeline.
inline void write_weights(const std::string& path, const std::vector<NamedTensor>& tensors) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw WeightsFileError(path + ": cannot write");
    auto put = [&](const void* p, size_t n) {
      out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    };
    const uint32_t count = static_cast<uint32_t>(tensors.size());
    put(kWeightsMagic, 4);
    put(&kWeightsVersion, 4);
    put(&count, 4);
    for (const auto& t : tensors) {
      const uint32_t name_len = static_cast<uint32_t>(t.name.size()), ndim = static_cast<uint32_t>(t.shape.size());
      if (static_cast<int64_t>(t.data.size()) != t.numel())
        throw WeightsFileError(path + ": tensor " + t.name + " has " + std::to_string(t.data.size()) +
                               " values for shape " + shape_string(t.shape));
      put(&name_len, 4);
      put(t.name.data(), name_len);
      put(&ndim, 4);
      put(t.shape.data(), 8 * ndim);
      put(t.data.data(), 4 * t.data.size());
    }
    if (!out.flush()) throw WeightsFileError(path + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw WeightsFileError(path + ": cannot rename " + tmp);
}

}  // namespace ac
