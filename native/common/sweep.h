// Study A's inference sweep, for any C++ program: walk the cells of resolution × batch × transfer mode, time each
// one, and stream one JSON-lines record per cell as soon as it is measured. Framework-free (no torch): a program
// implements SweepBackend (below) and calls run_sweep(); ac_libtorch sweep does so for torch::nn, TorchScript and
// AOTInductor, ac_cudnn sweep for the hand-written network.
//
// Flags read here (the program reads its own model flags first; Args::reject_unused() is its call):
//   --batches 8,16,...   --resolutions 8,16,...   positive integers; cells run resolution ascending, then batch
//                                                  ascending, then transfer mode in the order given
//   --warmup N --repeats N                        untimed calls, then timed calls per cell (repeats >= 1)
//   --cell-budget-s S                              with S > 0, a cell's timed calls end once they took S seconds
//                                                  and were at least kMinBudgetRepeats (sweep_cells.more_repeats)
//   --transfers float32-pageable,float32-pinned,uint8-pinned   how the input reaches the device (the backend's
//                                                  job); one process measures a shape's modes back to back
//   --start-cell K                                 first cell to run (0-based, in walk order): the launcher
//                                                  restarts a crashed program from the cell after the crash
//   --oom-at R:B:T,...                             (resolution, batch, transfer) already oom in an earlier process,
//                                                  so larger batches at R in mode T are skipped as if this process
//                                                  saw it
//   --logits-dir DIR                               each measured cell's last logits to DIR/cell<K>.f32 (float32,
//                                                  batch × classes), which the launcher checks against eager's
//                                                  (study_a/sweep/check.py); the record names the file
//
// Per cell: prepare(cell) (untimed: the device input buffer, zeroed, and whatever the model needs for the shape,
// kept from the shape's earlier mode where the backend can), on a cold cell `warmup` untimed forwards on that
// buffer (an oom shape fails here, before any host memory is spent on it), then load_input(cell) (untimed, on the
// host while the device runs the warm-up: the host input of the exact shape in the transfer's dtype and memory),
// then `repeats` timed calls (fewer under --cell-budget-s), each synchronised before it starts and timed by CUDA
// events from before the host-to-device copy to the logits, with an event after the copy: the copy's own time
// comes from the same calls. Then end_cell(). The backend's state for a shape is released (release()) before
// another shape, after a failed cell and at the end: a shape's modes share it, and only a cold cell (the first of
// its shape, or one the backend says is new, as a captured graph) has warm-up calls; the record says how many. The
// timed calls are a CUDA profiler range (cudaProfilerStart/Stop: what `ncu --profile-from-start off` profiles).
// Record fields:
//   {"kind":"cell","cell":K,"batch":B,"resolution":R,"transfer":T,"status":"ok"|"oom"|"error","message":...,
//    "times_ms":[...],"h2d_ms":[...],"h2d_bytes":N,"prepare_s":s,"warmup_calls":n,"alloc_peak_mib":x,
//    "start_monotonic_s":t0,"end_monotonic_s":t1[,"logits_file":path]}
// after a first {"kind":"sweep_start","cells":N,"start_cell":K} (the program is up: a death after it is a
// cell's), and a last {"kind":"sweep_done","cells":recorded}. A backend throws SweepOom for an out-of-memory (its
// framework's exception translated); any other exception is an `error` cell. Either way release() runs and the
// walk goes on. Once batch B is oom at resolution R in mode T, the cells at R needing at least as much device
// memory are recorded oom without being tried (study_a/sweep/cells.py, OomTracker: the same rule and messages):
// larger batches in T or a mode of no lower device_memory_rank, "skipped: batch B already out of memory at this
// resolution", and batch B in such another mode, the same message and " in T".
//
// Test hook (fault.h): AC_FAULT="cell:oom@K" makes cell K an injected oom, "cell:crash@K" raises SIGSEGV in cell K
// (after the earlier cells' records are out), "cell:wrong@K" adds 1 to cell K's saved logits (a model computing
// something else); several as "cell:oom@1,cell:crash@3". For CPU tests of the launcher's restart. "cell:kill@K" is
// the launcher's own (it SIGKILLs the whole job once cell K's row is kept): the program accepts and ignores it.
#pragma once

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "args.h"
#include "fault.h"
#include "jsonl.h"
#include "timer.h"

#ifdef AC_WITH_CUDA
#include <cuda_profiler_api.h>
#endif

namespace ac {

struct SweepCell {
  int64_t index;       // position in walk order over the whole grid
  int64_t batch;
  int64_t resolution;  // height = width
  std::string transfer;
};

// Out of device memory, as the backend's framework reported it (its message is the row's message).
class SweepOom : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline const std::vector<std::string>& sweep_transfers() {
  static const std::vector<std::string> modes{"float32-pageable", "float32-pinned", "uint8-pinned"};
  return modes;
}

// What a program implements. Calls per cell: prepare, forward×warmup (a cold cell), load_input,
// (copy_input, forward)×repeats, end_cell; release between shapes, after a failed cell and at the end.
class SweepBackend {
 public:
  virtual ~SweepBackend() = default;
  // Untimed: the device input buffer of shape batch × C × R × R in the transfer's dtype (float32, or uint8 for
  // uint8-pinned), zeroed, and the model for this shape (what the shape's earlier mode left, where it serves).
  // Returns whether the cell is cold: the first since release(), or one running something this process has not
  // run at this shape (a uint8 normalisation never run, a graph just captured). Throws SweepOom when the device is
  // out of memory.
  virtual bool prepare(const SweepCell& cell) = 0;
  // Untimed, while the warm-up runs: the host input of that shape, in pageable or page-locked memory as the mode
  // says.
  virtual void load_input(const SweepCell& cell) = 0;
  // The host-to-device copy of the host input into the device buffer (enqueued on stream()).
  virtual void copy_input() = 0;
  // The rest of one inference as the study timed it: normalisation on the device (uint8), the model, the logits.
  virtual void forward() = 0;
  // Frees the cell's own buffers (host and device input, logits), keeping the shape's state (allocations,
  // activations, workspace, graphs) for its next transfer mode; must not throw.
  virtual void end_cell() noexcept = 0;
  // Frees everything prepare() made: before another shape, after an oom or error in a cell, at the end; must not
  // throw.
  virtual void release() noexcept = 0;
  // Bytes copy_input() moves.
  virtual int64_t input_bytes() const = 0;
  virtual bool cuda() const = 0;
  virtual void* stream() const = 0;  // the cudaStream_t the work runs on (nullptr: the legacy default stream)
  virtual void synchronize() const = 0;
  virtual void reset_alloc_peak() const {}
  virtual std::optional<double> alloc_peak_mib() const { return std::nullopt; }
  // The last forward's logits (batch × classes, row-major) on the host; empty where the backend has none.
  virtual std::vector<float> logits() const { return {}; }
  // The profiled pass's device loop (sweep_serve.h `profile N`): runs `loop` under a device profiler and writes its
  // Chrome trace to `path` (the shape measure/profiled.py reads: Kineto's, or native/common/chrome_trace.h).
  // Returns "" when written, else why there is no device time (no profiler linked in, or it refused).
  virtual std::string trace_device(const std::function<void()>& loop, const std::string& path) {
    (void)loop;
    (void)path;
    return no_device_profiler();
  }
  // Which profiler wrote the trace: the profile record's device_source ("" leaves it to the conductor, whose
  // default is ac_libtorch's "LibTorch profiler (Kineto/CUPTI)").
  virtual std::string device_source() const { return ""; }
  static std::string no_device_profiler() {
    return "C++ program: no CUPTI activity subscriber is linked in (its kernels: sweep_kernels, under Nsight "
           "Compute); device columns null";
  }
};

struct SweepSettings {
  std::vector<int64_t> batches, resolutions;
  int64_t warmup = 0, repeats = 1, start_cell = 0;
  int64_t warmup_max = 0;    // --serve: the cap of a cell's steady-state warm-up (sweep_serve.h)
  bool serve = false;        // --serve 1: cells and timed blocks on the conductor's command (sweep_serve.h)
  double cell_budget_s = 0;  // 0: every cell makes `repeats` timed calls
  std::string logits_dir;    // empty: no logits saved
  std::vector<std::string> transfers;
  std::map<std::pair<int64_t, std::string>, int64_t> oom_at;  // (resolution, transfer) -> smallest oom batch
};

namespace sweep_detail {

inline std::vector<int64_t> positive_list(const Args& a, const std::string& name) {
  std::vector<int64_t> out;
  for (const std::string& item : comma_items(a.str(name))) {
    size_t end = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &end);
    } catch (const std::exception&) {
      end = 0;
    }
    if (end != item.size() || item.empty() || v < 1)
      throw ArgError("--" + name + ": '" + item + "' is not a positive integer");
    out.push_back(v);
  }
  if (out.empty()) throw ArgError("--" + name + ": no values");
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// AC_FAULT's cell items -> cell index -> "oom" | "crash" | "wrong" (kill is the launcher's)
inline std::map<int64_t, std::string> faults() {
  std::map<int64_t, std::string> out;
  for (const Fault& f : faults_at("cell"))
    if (f.what != "kill") out[std::stoll(f.where)] = f.what;
  return out;
}

}  // namespace sweep_detail

inline SweepSettings read_sweep_settings(const Args& a) {
  SweepSettings s;
  s.batches = sweep_detail::positive_list(a, "batches");
  s.resolutions = sweep_detail::positive_list(a, "resolutions");
  s.warmup = a.integer("warmup");
  s.repeats = a.integer("repeats");
  s.start_cell = a.integer("start-cell", 0);
  s.serve = a.has("serve") && a.boolean("serve");
  s.warmup_max = a.integer("warmup-max", 0);
  s.cell_budget_s = a.number("cell-budget-s", 0);
  if (!(s.cell_budget_s >= 0)) throw ArgError("--cell-budget-s must be >= 0 seconds");
  s.logits_dir = a.str("logits-dir", "");
  if (s.warmup < 0 || s.repeats < 1) throw ArgError("--warmup must be >= 0 and --repeats >= 1");
  if (s.warmup_max < 0) throw ArgError("--warmup-max must be >= 0");
  if (s.start_cell < 0) throw ArgError("--start-cell must be >= 0");
  const auto& modes = sweep_transfers();
  for (const std::string& t : comma_items(a.str("transfers"))) {
    if (std::find(modes.begin(), modes.end(), t) == modes.end())
      throw ArgError("--transfers: '" + t + "' is not float32-pageable, float32-pinned or uint8-pinned");
    if (std::find(s.transfers.begin(), s.transfers.end(), t) != s.transfers.end())
      throw ArgError("--transfers: '" + t + "' is given twice");
    s.transfers.push_back(t);
  }
  if (s.transfers.empty()) throw ArgError("--transfers: no values");
  for (const std::string& item : comma_items(a.str("oom-at", ""))) {
    const size_t first = item.find(':');
    const size_t second = first == std::string::npos ? first : item.find(':', first + 1);
    if (second == std::string::npos) throw ArgError("--oom-at: '" + item + "' is not RESOLUTION:BATCH:TRANSFER");
    const int64_t r = std::stoll(item.substr(0, first)), b = std::stoll(item.substr(first + 1, second - first - 1));
    const auto key = std::make_pair(r, item.substr(second + 1));
    auto it = s.oom_at.find(key);
    s.oom_at[key] = it == s.oom_at.end() ? b : std::min(it->second, b);
  }
  return s;
}

// The grid in walk order: resolution ascending, then batch ascending, then the transfer modes as given.
inline std::vector<SweepCell> sweep_cells(const SweepSettings& s) {
  std::vector<SweepCell> cells;
  for (int64_t r : s.resolutions)
    for (int64_t b : s.batches)
      for (const std::string& t : s.transfers) cells.push_back({static_cast<int64_t>(cells.size()), b, r, t});
  return cells;
}

namespace sweep_detail {

inline Record cell_record(const SweepCell& c, const std::string& status, const std::string& message) {
  Record r("cell");
  r.add("cell", c.index).add("batch", c.batch).add("resolution", c.resolution).add("transfer", c.transfer)
      .add("status", status);
  if (message.empty()) {
    r.add("message", std::optional<double>());  // null
  } else {
    r.add("message", message);
  }
  return r;
}

// The timed forwards are the profiler's range: under `ncu --profile-from-start off` (study_a/sweep/kernels.py)
// only their kernels are profiled, not start-up nor warm-up. Without a profiler attached the calls do nothing;
// their status is not checked, since a profiler's absence or refusal must not fail a measured cell.
inline void profiler_range([[maybe_unused]] const SweepBackend& b, [[maybe_unused]] bool on) {
#ifdef AC_WITH_CUDA
  if (b.cuda()) (void)(on ? cudaProfilerStart() : cudaProfilerStop());
#endif
}

inline constexpr int64_t kMinBudgetRepeats = 3;  // sweep_cells.MIN_BUDGET_REPEATS

// Device memory a cell needs beyond the model's at one shape, by transfer mode (sweep_cells.DEVICE_MEMORY_RANK):
// both float32 modes hold one float32 batch, uint8-pinned its uint8 batch beside it; pinning is host memory.
inline int device_memory_rank(const std::string& transfer) { return transfer == "uint8-pinned" ? 1 : 0; }

// Why the cell is skipped, or "": an oom cell (batch, transfer) at its resolution that needed no more device
// memory, the smallest batch first (sweep_cells.OomTracker.skip_message).
inline std::string oom_skip(const std::map<std::pair<int64_t, std::string>, int64_t>& oom_at, const SweepCell& c) {
  std::optional<std::pair<int64_t, std::string>> found;
  for (const auto& [key, batch] : oom_at) {
    const auto& [resolution, transfer] = key;
    if (resolution != c.resolution || device_memory_rank(transfer) > device_memory_rank(c.transfer)) continue;
    if (c.batch > batch || (c.batch == batch && transfer != c.transfer)) {
      const std::pair<int64_t, std::string> candidate{batch, transfer};
      if (!found || candidate < *found) found = candidate;
    }
  }
  if (!found) return "";
  const std::string message = "skipped: batch " + std::to_string(found->first) +
                              " already out of memory at this resolution";
  return c.batch > found->first ? message : message + " in " + found->second;
}

// Timed calls, each from before its copy to its logits, and the copies within them: (times_ms, h2d_ms). Up to
// `repeats`; with a budget, none once they took budget_s and were at least kMinBudgetRepeats (each call starts
// synchronised, so the host's clock at its start has seen the earlier calls end).
inline std::pair<std::vector<double>, std::vector<double>> timed(SweepBackend& b, int64_t repeats, double budget_s) {
  StepTimer calls(b.cuda(), b.stream()), copies(b.cuda(), b.stream());
  double first = 0;
  for (int64_t done = 0; done < repeats; ++done) {
    b.synchronize();
    if (done == 0) first = monotonic_s();
    if (budget_s > 0 && done >= kMinBudgetRepeats && monotonic_s() - first >= budget_s) break;
    calls.start();
    copies.start();
    b.copy_input();
    copies.stop();
    b.forward();
    calls.stop();
  }
  return {calls.elapsed_ms(), copies.elapsed_ms()};
}

// The backend's last logits to DIR/cell<K>.f32; "" where it has none. `wrong` perturbs them (the test hook).
inline std::string save_logits(const SweepBackend& b, const std::string& dir, int64_t cell, bool wrong) {
  std::vector<float> values = b.logits();
  if (values.empty()) return "";
  if (wrong)
    for (float& v : values) v += 1.0f;
  const std::string path = dir + "/cell" + std::to_string(cell) + ".f32";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  if (!out) throw std::runtime_error("cannot write the cell's logits to " + path);
  return path;
}

}  // namespace sweep_detail

// Walks the cells from s.start_cell and streams their records; returns the number of cells recorded.
inline int64_t run_sweep(SweepBackend& backend, const SweepSettings& s) {
  const auto faults = sweep_detail::faults();
  auto oom_at = s.oom_at;
  int64_t recorded = 0;
  const std::vector<SweepCell> cells = sweep_cells(s);
  constexpr std::pair<int64_t, int64_t> kNone{0, 0};  // grid values are positive
  std::pair<int64_t, int64_t> held = kNone;            // the (batch, resolution) whose state the backend keeps
  Record("sweep_start").add("cells", static_cast<int64_t>(cells.size())).add("start_cell", s.start_cell).emit();
  for (const SweepCell& cell : cells) {
    if (cell.index < s.start_cell) continue;
    const std::string skip = sweep_detail::oom_skip(oom_at, cell);
    if (!skip.empty()) {
      sweep_detail::cell_record(cell, "oom", skip).emit();
      ++recorded;
      continue;
    }
    const std::pair<int64_t, int64_t> shape{cell.batch, cell.resolution};
    if (held != kNone && held != shape) {
      backend.release();
      held = kNone;
    }
    const auto fault = faults.find(cell.index);
    const double start = monotonic_s();
    std::string status = "ok", message;
    try {
      if (fault != faults.end() && fault->second == "crash") std::raise(SIGSEGV);
      if (fault != faults.end() && fault->second == "oom") throw SweepOom("injected out of memory (AC_FAULT)");
      backend.reset_alloc_peak();
      double mark = monotonic_s();
      const bool cold = backend.prepare(cell);
      held = shape;
      backend.synchronize();
      double prepare_s = monotonic_s() - mark;
      const int64_t warmup = cold ? s.warmup : 0;
      for (int64_t i = 0; i < warmup; ++i) backend.forward();
      mark = monotonic_s();
      backend.load_input(cell);
      prepare_s += monotonic_s() - mark;
      backend.synchronize();
      sweep_detail::profiler_range(backend, true);
      const auto [times, h2d] = sweep_detail::timed(backend, s.repeats, s.cell_budget_s);
      sweep_detail::profiler_range(backend, false);
      backend.synchronize();
      const std::optional<double> peak = backend.alloc_peak_mib();
      const int64_t bytes = backend.input_bytes();
      const std::string logits = s.logits_dir.empty() ? "" : sweep_detail::save_logits(
          backend, s.logits_dir, cell.index, fault != faults.end() && fault->second == "wrong");
      const double end = monotonic_s();
      backend.end_cell();
      Record r = sweep_detail::cell_record(cell, status, message);
      r.add("times_ms", times).add("h2d_ms", h2d).add("h2d_bytes", bytes)
          .add("prepare_s", prepare_s).add("warmup_calls", warmup).add("alloc_peak_mib", peak)
          .add("start_monotonic_s", start).add("end_monotonic_s", end);
      if (!logits.empty()) r.add("logits_file", logits);
      r.emit();
      ++recorded;
      continue;
    } catch (const SweepOom& e) {
      status = "oom";
      message = e.what();
      oom_at[{cell.resolution, cell.transfer}] = cell.batch;  // batches ascend: a smaller one there was no oom
    } catch (const std::exception& e) {
      status = "error";
      message = e.what();
    }
    backend.release();
    held = kNone;
    Record r = sweep_detail::cell_record(cell, status, message);
    r.add("start_monotonic_s", start).add("end_monotonic_s", monotonic_s());
    r.emit();
    ++recorded;
  }
  backend.release();
  Record("sweep_done").add("cells", recorded).emit();
  return recorded;
}

}  // namespace ac
