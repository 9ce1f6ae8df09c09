// Study A's sweep as a served worker (--serve): the conductor (study_a/sweep/conductor.py) tells the program which
// cell to prepare and when to time a block of calls, so that the implementations of one comparison take turns on
// the GPU in blocks far shorter than the host's slow periods. The protocol is docs/measurement.md's; in short,
// one command per stdin line, one JSON-lines record per command on stdout:
//   load K    load cell K: release another shape's state, prepare the shape, one forward on a cold cell, the
//             host input: {"kind":"cell_loaded","cell":K,"prepare_s":s}, or the cell's final record when it is
//             skipped, out of memory or failed. Nothing is timed, so the conductor loads every worker's cell at once.
//   cell K    load cell K unless it is loaded, then warm-up windows of kSteadyWindow timed calls until two
//             consecutive window medians agree within kSteadyTolerance (at least --warmup calls on a cold cell, at
//             most --warmup-max): {"kind":"ready","cell":K,"warmup_calls":n,"steady":b,"call_ms":m,"prepare_s":s},
//             or the cell's final record (the conductor times nothing then)
//   time N    N timed calls, as run_sweep's: {"kind":"block","cell":K,"times_ms":[...],"h2d_ms":[...]}
//   profile N the profiled pass after the cell's timed turns (measure/profiled.py's two loops: never timed):
//             {"kind":"profile","cell":K,"status":"ok","profiled_calls":N,"host_issue_ms":m,"host_cpu_ms":m,
//             "wall_ms":m,"trace_file":path[,"device_source":what]}, the device loop's Chrome trace in `path`
//             (ac_libtorch: LibTorch's Kineto profiler; ac_cudnn: CUPTI's activity API, native/cudnn/cupti_trace.h),
//             which the conductor reads and deletes; or "device_message":why and null device columns where the
//             backend has no device profiler (ac_cudnn built without CUPTI) or it failed or refused
//   end       the cell's record, as run_sweep writes it, with every block's calls
//   release   the shape's state freed: {"kind":"released"}
// End of input releases everything and writes {"kind":"sweep_done"}. The fault hook (AC_FAULT's cell items) acts
// where a cell loads, outside every timed region.
#pragma once

#include <time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cmath>
#include <iostream>
#include <sstream>

#include "sweep.h"

namespace ac {

inline constexpr int64_t kSteadyWindow = 3;         // sweep_worker.STEADY_WINDOW
inline constexpr double kSteadyTolerance = 0.05;    // sweep_worker.STEADY_TOLERANCE
inline constexpr double kWarmupBudgetS = 2.0;       // sweep_worker.WARMUP_BUDGET_S: no more warm-up after this

namespace sweep_detail {

inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Steady {
  int64_t calls = 0;
  bool steady = false;
  double call_ms = 0;
};

// Warm-up windows of timed calls (their times discarded) until two consecutive medians agree, after `minimum`
// calls, with a cap of `maximum` calls or kWarmupBudgetS.
inline Steady warm_up(SweepBackend& b, int64_t minimum, int64_t maximum) {
  Steady out;
  double previous = -1;
  const double start = monotonic_s();
  while (true) {
    const double m = median_of(timed(b, kSteadyWindow, 0).first);
    out.calls += kSteadyWindow;
    out.call_ms = m;
    if (out.calls >= minimum && previous > 0 && std::abs(m / previous - 1) <= kSteadyTolerance) {
      out.steady = true;
      return out;
    }
    if (out.calls >= std::max(minimum, maximum) || monotonic_s() - start >= kWarmupBudgetS) return out;
    previous = m;
  }
}

inline double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

inline double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// measure/profiled.py's host loop: per call, synchronised before it starts, the wall time until it returns
// (host issue), the thread's CPU time in that span, and the wall time until the device has finished; medians.
// Then the device loop, the same calls under the backend's device profiler (trace_device), its trace in `dir`
// (the job's scratch folder, beside the logits; the system's temporary folder without one).
inline Record profiled_pass(SweepBackend& b, int64_t cell, int64_t calls, const std::string& dir) {
  std::vector<double> issue, cpu, wall;
  for (int64_t i = 0; i < calls; ++i) {
    b.synchronize();
    const double t0 = wall_ms(), c0 = thread_cpu_ms();
    b.copy_input();
    b.forward();
    const double t1 = wall_ms(), c1 = thread_cpu_ms();
    b.synchronize();
    issue.push_back(t1 - t0);
    cpu.push_back(c1 - c0);
    wall.push_back(wall_ms() - t0);
  }
  Record r("profile");
  r.add("cell", cell).add("status", "ok").add("profiled_calls", calls).add("host_issue_ms", median_of(issue))
      .add("host_cpu_ms", median_of(cpu)).add("wall_ms", median_of(wall));
  const std::filesystem::path folder = dir.empty() ? std::filesystem::temp_directory_path()
                                                  : std::filesystem::path(dir);
  const std::string path =
      (folder / ("ac-profile-" + std::to_string(getpid()) + "-" + std::to_string(cell) + ".json")).string();
  std::string why;
  try {
    why = b.trace_device([&] {
      for (int64_t i = 0; i < calls; ++i) {
        b.copy_input();
        b.forward();
        b.synchronize();
      }
    }, path);
  } catch (const std::exception& e) {
    why = std::string("the device profiler failed: ") + e.what();
  }
  if (why.empty()) {
    r.add("trace_file", path).add("cuda", b.cuda());
    if (!b.device_source().empty()) r.add("device_source", b.device_source());
    return r;
  }
  const std::optional<double> none;
  for (const char* key : {"device_ms", "memcpy_ms", "kernels", "launch_calls", "device_busy_ms", "device_idle_ms"})
    r.add(key, none);
  r.add("device_message", why);
  return r;
}

}  // namespace sweep_detail

inline int64_t run_sweep_served(SweepBackend& backend, const SweepSettings& s) {
  const auto faults = sweep_detail::faults();
  auto oom_at = s.oom_at;
  const std::vector<SweepCell> cells = sweep_cells(s);
  constexpr std::pair<int64_t, int64_t> kNone{0, 0};
  std::pair<int64_t, int64_t> held = kNone;
  const SweepCell* cell = nullptr;  // the cell prepared and not yet ended
  bool loaded = false, cold = false;  // whether `cell` is loaded (and was cold) but not yet warmed up
  std::vector<double> times, h2d;
  double start = 0, prepare_s = 0;
  int64_t warmup = 0, recorded = 0;

  auto failed = [&](const std::string& status, const std::string& message) {
    if (status == "oom") oom_at[{cell->resolution, cell->transfer}] = cell->batch;  // batches ascend
    backend.release();
    held = kNone;
    Record r = sweep_detail::cell_record(*cell, status, message);
    r.add("start_monotonic_s", start).add("end_monotonic_s", monotonic_s());
    r.emit();
    ++recorded;
    cell = nullptr;
  };
  auto guarded = [&](auto&& body) {
    try {
      body();
    } catch (const SweepOom& e) {
      failed("oom", e.what());
    } catch (const std::exception& e) {
      failed("error", e.what());
    }
  };

  Record("sweep_start").add("cells", static_cast<int64_t>(cells.size())).add("start_cell", int64_t{0}).emit();
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string op;
    int64_t n = 0;
    words >> op >> n;
    if (op == "load" || (op == "cell" && !(loaded && cell != nullptr && cell->index == n))) {
      // load the cell: skipped, failed (its final record) or loaded
      if (n < 0 || n >= static_cast<int64_t>(cells.size())) throw ArgError("serve: no cell " + std::to_string(n));
      cell = &cells[n];
      loaded = false;
      times.clear();
      h2d.clear();
      start = monotonic_s();
      const std::string skip = sweep_detail::oom_skip(oom_at, *cell);
      if (!skip.empty()) {
        sweep_detail::cell_record(*cell, "oom", skip).emit();
        ++recorded;
        cell = nullptr;
        continue;
      }
      const std::pair<int64_t, int64_t> shape{cell->batch, cell->resolution};
      if (held != kNone && held != shape) {
        backend.release();
        held = kNone;
      }
      const auto fault = faults.find(cell->index);
      guarded([&] {
        if (fault != faults.end() && fault->second == "crash") std::raise(SIGSEGV);
        if (fault != faults.end() && fault->second == "oom") throw SweepOom("injected out of memory (AC_FAULT)");
        backend.reset_alloc_peak();
        double mark = monotonic_s();
        cold = backend.prepare(*cell);
        held = shape;
        if (cold) backend.forward();  // an oom shape fails here, before its host input is made
        backend.synchronize();
        prepare_s = monotonic_s() - mark;
        mark = monotonic_s();
        backend.load_input(*cell);
        prepare_s += monotonic_s() - mark;
        loaded = true;
        if (op == "load") Record("cell_loaded").add("cell", cell->index).add("prepare_s", prepare_s).emit();
      });
      if (op == "load" || cell == nullptr) continue;
    }
    if (op == "cell") {  // the loaded cell's warm-up
      loaded = false;
      guarded([&] {
        const sweep_detail::Steady warm = sweep_detail::warm_up(backend, cold ? s.warmup : 0, s.warmup_max);
        warmup = warm.calls + (cold ? 1 : 0);
        Record("ready").add("cell", cell->index).add("warmup_calls", warmup).add("steady", warm.steady)
            .add("call_ms", warm.call_ms).add("prepare_s", prepare_s).emit();
      });
    } else if (op == "time") {
      if (cell == nullptr || n < 1) throw ArgError("serve: 'time N' needs a prepared cell and N >= 1");
      guarded([&] {
        sweep_detail::profiler_range(backend, true);
        const auto [t, c] = sweep_detail::timed(backend, n, 0);
        sweep_detail::profiler_range(backend, false);
        times.insert(times.end(), t.begin(), t.end());
        h2d.insert(h2d.end(), c.begin(), c.end());
        Record("block").add("cell", cell->index).add("times_ms", t).add("h2d_ms", c).emit();
      });
    } else if (op == "profile") {
      if (cell == nullptr || n < 1) throw ArgError("serve: 'profile N' needs a prepared cell and N >= 1");
      try {
        sweep_detail::profiled_pass(backend, cell->index, n, s.logits_dir).emit();
      } catch (const std::exception& e) {  // the cell's timed calls stand: the failure is the profile's
        Record("profile").add("cell", cell->index).add("status", "error").add("message", e.what()).emit();
      }
    } else if (op == "end") {
      if (cell == nullptr) throw ArgError("serve: 'end' without a prepared cell");
      guarded([&] {
        backend.synchronize();
        const auto fault = faults.find(cell->index);
        const std::string logits = s.logits_dir.empty() ? "" : sweep_detail::save_logits(
            backend, s.logits_dir, cell->index, fault != faults.end() && fault->second == "wrong");
        Record r = sweep_detail::cell_record(*cell, "ok", "");
        r.add("times_ms", times).add("h2d_ms", h2d).add("h2d_bytes", backend.input_bytes())
            .add("prepare_s", prepare_s).add("warmup_calls", warmup).add("alloc_peak_mib", backend.alloc_peak_mib())
            .add("start_monotonic_s", start).add("end_monotonic_s", monotonic_s());
        if (!logits.empty()) r.add("logits_file", logits);
        backend.end_cell();
        r.emit();
        ++recorded;
        cell = nullptr;
      });
    } else if (op == "release") {
      backend.release();
      held = kNone;
      Record("released").emit();
    } else {
      throw ArgError("serve: '" + line + "' is not 'load K', 'cell K', 'time N', 'profile N', 'end' or 'release'");
    }
  }
  backend.release();
  Record("sweep_done").add("cells", recorded).emit();
  return recorded;
}

}  // namespace ac
