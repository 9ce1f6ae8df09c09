// Readers of the files every backend shares (layouts: src/abstraction_cost/data/prepared.py and order.py):
//   <split>-images.u8   uint8, count × channels × height × width, C order
//   <split>-labels.i64  int64 little-endian, count
//   sample order        int32 little-endian, epochs × count; row e is the order of epoch e
// The launcher reads manifest.json and passes counts, shapes and paths as flags: C++ never parses JSON.
#pragma once

#include <bit>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ac {

static_assert(std::endian::native == std::endian::little, "the prepared files are little-endian");

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The whole file as T[expected_count]; any other size is an error naming the file and both sizes.
template <typename T>
std::vector<T> read_exact(const std::string& path, int64_t expected_count) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw DataError(path + ": cannot open");
  const int64_t bytes = static_cast<int64_t>(in.tellg());
  const int64_t expected_bytes = expected_count * static_cast<int64_t>(sizeof(T));
  if (bytes != expected_bytes)
    throw DataError(path + ": " + std::to_string(bytes) + " bytes, expected " + std::to_string(expected_bytes) +
                    " (" + std::to_string(expected_count) + " × " + std::to_string(sizeof(T)) + " bytes)");
  std::vector<T> data(static_cast<size_t>(expected_count));
  in.seekg(0);
  if (expected_bytes && !in.read(reinterpret_cast<char*>(data.data()), expected_bytes))
    throw DataError(path + ": short read");
  return data;
}

struct Split {
  int64_t count = 0, channels = 0, height = 0, width = 0;
  std::vector<uint8_t> images;  // count × C × H × W
  std::vector<int64_t> labels;  // count

  int64_t image_bytes() const { return channels * height * width; }
};

inline Split read_split(const std::string& images_path, const std::string& labels_path, int64_t count,
                        int64_t channels, int64_t height, int64_t width, int64_t classes) {
  if (count < 0 || channels <= 0 || height <= 0 || width <= 0)
    throw DataError(images_path + ": invalid shape " + std::to_string(count) + "×" + std::to_string(channels) +
                    "×" + std::to_string(height) + "×" + std::to_string(width));
  Split s{count, channels, height, width, {}, {}};
  s.images = read_exact<uint8_t>(images_path, count * channels * height * width);
  s.labels = read_exact<int64_t>(labels_path, count);
  for (int64_t i = 0; i < count; ++i)
    if (s.labels[i] < 0 || s.labels[i] >= classes)
      throw DataError(labels_path + ": label " + std::to_string(s.labels[i]) + " at index " + std::to_string(i) +
                      " is outside 0.." + std::to_string(classes - 1));
  return s;
}

// epochs × count indices, each a permutation of 0..count-1 (checked: a wrong file would silently skew training).
inline std::vector<int32_t> read_order(const std::string& path, int64_t epochs, int64_t count) {
  std::vector<int32_t> order = read_exact<int32_t>(path, epochs * count);
  for (int64_t e = 0; e < epochs; ++e) {
    std::vector<bool> seen(static_cast<size_t>(count), false);
    for (int64_t i = 0; i < count; ++i) {
      const int32_t k = order[e * count + i];
      if (k < 0 || k >= count || seen[k])
        throw DataError(path + ": row " + std::to_string(e) + " is not a permutation of 0.." +
                        std::to_string(count - 1));
      seen[k] = true;
    }
  }
  return order;
}

}  // namespace ac
