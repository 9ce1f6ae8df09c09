// A framework-free SweepBackend (native/common/sweep.h) for CPU tests of the sweep driver and its launcher, and
// the smallest example of the interface: the "model" sums the input, the device is the CPU, and a cell whose
// batch × resolution² exceeds --oom-above is out of memory, as a too-large cell is on a GPU.
//   g++ -std=c++20 -O1 -I native/common native/common/examples/sweep_fake.cpp -o sweep_fake
//   sweep_fake --batches 1,2,4 --resolutions 8,16 --warmup 0 --repeats 3 --transfers uint8-pinned --oom-above 512
#include <iostream>
#include <numeric>

#include "args.h"
#include "sweep.h"

namespace {

class FakeBackend : public ac::SweepBackend {
 public:
  explicit FakeBackend(int64_t oom_above) : oom_above_(oom_above) {}

  // Cold when the shape's state is new (the first cell since release()), as a framework's allocations are.
  bool prepare(const ac::SweepCell& cell) override {
    const int64_t elements = cell.batch * 3 * cell.resolution * cell.resolution;
    if (cell.batch * cell.resolution * cell.resolution > oom_above_)
      throw ac::SweepOom("fake: cannot allocate " + std::to_string(elements) + " elements");
    element_bytes_ = cell.transfer == "uint8-pinned" ? 1 : 4;
    device_.assign(static_cast<size_t>(elements), 0.0f);
    const bool cold = !held_;
    held_ = true;
    return cold;
  }
  void load_input(const ac::SweepCell&) override { host_.assign(device_.size(), 1.0f); }
  void copy_input() override { std::copy(host_.begin(), host_.end(), device_.begin()); }
  void forward() override { sink_ += std::accumulate(device_.begin(), device_.end(), 0.0); }
  void end_cell() noexcept override {
    host_.clear();
    device_.clear();
  }
  void release() noexcept override {
    end_cell();
    held_ = false;
  }
  int64_t input_bytes() const override { return static_cast<int64_t>(host_.size()) * element_bytes_; }
  bool cuda() const override { return false; }
  void* stream() const override { return nullptr; }
  void synchronize() const override {}

 private:
  int64_t oom_above_, element_bytes_ = 4;
  bool held_ = false;
  std::vector<float> host_, device_;
  double sink_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    const ac::Args args(argc, argv, 1);
    const ac::SweepSettings settings = ac::read_sweep_settings(args);
    FakeBackend backend(args.integer("oom-above"));
    args.reject_unused();
    ac::run_sweep(backend, settings);
    return 0;
  } catch (const std::exception& e) {
    ac::Record("error").add("status", "error").add("message", e.what()).emit();
    std::cerr << "sweep_fake: " << e.what() << std::endl;
    return 2;
  }
}
