"""Study B's end-to-end and selective steps under the measurement protocol (docs/measurement.md): eager in a process
that has loaded no compiled code, interleaved in short turns with the compiled variants in processes of their own,
over several invocations.

For one setting of a (model, pair) job, an invocation starts together (start-ups overlap) one vision_worker per
role: `clean` (eager and the eager baselines: channels_last, cuda_graphs) and one `compiled` worker per compile mode
of study_b.models.modes (the whole model compiled; the layer mode's also the selective variants; each also
`eager_in_process`, eager built after its compiled code). Each prepares its variants (build from the Inductor cache,
output check, warm-up to a steady state), at once, but a worker that times candidate algorithms as it builds (under
cuDNN's benchmark mode, or a max-autotune mode) after them by itself; then every variant of every worker takes
`blocks` turns in rotating order, each a block of calls filling about `block_ms` and together at least
`min_calls`: a slow period of the host falls on every variant alike, and the turns pair the variants' times. The
end-to-end step and the selective step share the clean worker's eager (one measurement: their baselines are the
same numbers) and the layer mode's compiled worker; the drift of eager in a process with compiled code is
eager_in_process against eager, paired.

Invocations repeat in fresh processes: `invocations`, then up to `max_invocations` while some variant's
invocation medians do not pin its time within `precision` (the t-interval's relative half width). The workers
of the first `invocations` start and prepare at once (`prepare_together`, sessions), since a fresh process's build
from the Inductor cache takes several times an invocation's turns; then each invocation is timed in turn, the later
ones' workers waiting idle as a worker waits for the other workers' turns in its own invocation. The first
invocation's builds are the vision_builds rows, taken beside the other invocations' builds (each compiled worker
builds from the cache in one compile thread: inductor_env); with study_b.fresh_compile_cache (cold compiles in
Inductor's parallel compile workers, filling the cache the later invocations hit) the first prepares alone. Each
invocation's records are kept as a step of the job (measure/steps.py), so a resumed job keeps the invocations it
has. A worker that dies makes its unfinished variants of that invocation `error` records with its exit status;
the other invocations still count.

The profiled pass (study_b.models.protocol.profile_calls; 0: none): in the first invocation only, after every
variant's last timed turn (a process stays slower once the profiler has run in it, so no timed call follows it),
each worker is told `profile N` with its end-to-end variants: measure/profiled.py's host loop of every variant,
then its device loop of every variant under torch.profiler. The pass is kept in the variant's record (`profile`)
and becomes its vision_profile row; a worker that dies in it leaves its timed blocks as they are, and its
variants' profile rows `error` with the exit status.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ...implementations import times_candidates
from ...measure import affinity, invocation_protocol, profiled, steps, worker_phases
from ...measure.statistics import median, relative_half_width
from ...programs.workers import Worker, WorkerDied
from . import vision as vm

log = logging.getLogger(__name__)

PROTOCOL_DEFAULTS = {"invocations": 3, "max_invocations": 5, "precision": 0.05, "blocks": 6, "block_ms": 50.0,
                     "min_calls": 12, "warmup_max": 60, "profile_calls": 5}
CLEAN = "clean"
E2E_CLEAN = ("eager", "eager_channels_last", "eager_cuda_graphs")
E2E_VARIANTS = (*E2E_CLEAN, "compiled", "eager_in_process")   # those the profiled pass profiles
PROFILE_KEY = "study_b.models.protocol.profile_calls"
PROFILE_COLUMNS = ("profiled_calls", "host_issue_ms", "host_cpu_ms", "wall_ms", "device_source",
                   *profiled.DEVICE_COLUMNS, "device_message")
MAX_CALLS_PER_BLOCK = 2000


@dataclass(frozen=True, kw_only=True)
class Protocol(invocation_protocol.InvocationProtocol):
    """study_b.models.protocol (config/README.md: its keys and defaults): the shared invocation protocol's keys and
    the least calls a variant has over an invocation's blocks."""
    min_calls: int

    @classmethod
    def from_config(cls, section: dict) -> "Protocol":
        given = section.get("protocol") or {}
        invocation_protocol.check(given, "study_b.models.protocol", {"min_calls": invocation_protocol.count(1)})
        return cls(**invocation_protocol.settings(PROTOCOL_DEFAULTS, given))

    def calls_per_block(self, call_ms: float) -> int:
        """Calls filling about block_ms, and over the blocks at least min_calls."""
        by_time = round(self.block_ms / max(call_ms, 1e-3))
        return max(1, min(MAX_CALLS_PER_BLOCK, max(by_time, math.ceil(self.min_calls / self.blocks))))


def worker_key(mode: str | None) -> str:
    return CLEAN if mode is None else f"compiled:{mode}"


def times_algorithms(config: dict, workers) -> frozenset[str]:
    """The workers (keys) that time candidate algorithms as they build their variants, and so prepare alone: every
    one under cuDNN's benchmark mode (backend_flags.cudnn_benchmark), else the compiled ones of a max-autotune mode
    (their Inductor cache entry may miss): implementations.times_candidates."""
    return frozenset(k for k in workers if times_candidates(config, None if k == CLEAN else k.split(":", 1)[1]))


def _spec(config: dict, case: vm.Case, role: str, choices: dict | None, protocol: Protocol) -> dict:
    section = config["study_b"]["models"]
    backend = vm.BACKEND if isinstance(vm.BACKEND, str) else f"{vm.BACKEND.__module__}:{vm.BACKEND.__qualname__}"
    return {"role": role, "backend": backend, "baselines": list(section["baselines"]),
            "case": {k: v for k, v in case.__dict__.items() if k not in ("batch_size", "numerics", "memory_format")},
            "setting": {"batch_size": case.batch_size, "numerics": case.numerics,
                        "memory_format": case.memory_format},
            "choices": choices, "warmup": case.warmup, "warmup_max": protocol.warmup_max}


def _command(spec: dict, directory: Path, key: str) -> list[str]:
    path = directory / f"{key.replace(':', '-')}-{spec['invocation']}.spec.json"
    path.write_text(json.dumps(spec))
    return [sys.executable, "-m", "abstraction_cost.study_b.models.worker", str(path)]


class _Invocation:
    """One invocation's workers (one per role of `specs`, fresh processes) and their records, from launch to close."""

    def __init__(self, specs: dict[str, dict], inv: int, directory: Path, spawned: float):
        self.inv, self.spawned = inv, spawned
        self.records: dict[tuple[str, str], dict] = {}
        self.phases: dict[str, str] = {}   # per worker, for the log: when it was up and ready, and its longest build
        self.workers = {key: Worker(f"vision-{key}-{inv}", _command({**spec, "invocation": inv}, directory, key))
                        for key, spec in specs.items()}
        self.alive: dict[str, Worker] = {}

    def died(self, key: str, err: WorkerDied) -> None:
        log.warning("invocation %d: worker %s died: %s", self.inv, key, err.message)
        self.alive.pop(key, None)
        message = f"worker process ended (exit status {err.returncode}): {err.message}"
        for (k, variant), r in list(self.records.items()):
            if k == key and r["status"] == "ok":
                self.records[(k, variant)] = {**r, "status": err.status, "message": message, "blocks": [],
                                              "turns": []}
        if not any(k == key for k, _ in self.records):
            self.records[(key, "*")] = {"worker": key, "variant": "*", "status": err.status, "message": message,
                                        "exit_status": err.returncode}

    def up(self, alone: frozenset[str]) -> None:
        """Wait for each worker to be up and tell it to prepare (every worker but those of `alone` prepares at once;
        a dead one says how at `ready`)."""
        for key, worker in self.workers.items():
            try:
                up = worker.ask(None, "up")
                self.phases[key] = f"up {up.get('monotonic_s', self.spawned) - self.spawned:.1f} s"
                if key not in alone:
                    worker.send("prepare")
                self.alive[key] = worker
            except WorkerDied as err:
                self.died(key, err)

    def ready(self, keys: list[str]) -> None:
        """The variants of each worker in `keys`, built, checked and warmed up: their records, nothing timed yet."""
        for key in [k for k in keys if k in self.alive]:
            try:
                ready = self.alive[key].ask(None, "ready")
            except WorkerDied as err:
                self.died(key, err)
                continue
            for variant, answer in ready["variants"].items():
                self.records[(key, variant)] = {"worker": key, "variant": variant, **answer, "blocks": [], "turns": []}
            builds = {v: a["build_s"] for v, a in ready["variants"].items() if a.get("build_s") is not None}
            longest = max(builds, key=builds.get, default=None)
            self.phases[key] += (f", ready {ready.get('monotonic_s', self.spawned) - self.spawned:.1f} s"
                                 + (f" (longest build {longest} {builds[longest]:.1f} s, warm-ups "
                                    f"{sum(a.get('warmup_s') or 0 for a in ready['variants'].values()):.1f} s)"
                                    if longest else ""))

    def turns(self, protocol: Protocol) -> None:
        """Every ok variant's `blocks` turns, in rotating order, with every worker on one CPU of the slot, the
        fastest at each turn's start, so that a turn's pair meets the same host."""
        slots = [k for k, r in self.records.items() if r["status"] == "ok" and k[0] in self.alive]
        calls = {k: protocol.calls_per_block(self.records[k]["call_ms"]) for k in slots}
        with affinity.turns_on_one_cpu([w.proc.pid for w in self.alive.values()]) as cpus:
            for turn in range(protocol.blocks):
                cpus.pick()
                shift = turn % len(slots) if slots else 0
                for key, variant in slots[shift:] + slots[:shift]:
                    record = self.records[(key, variant)]
                    if key not in self.alive or record["status"] != "ok":
                        continue
                    try:
                        answer = self.alive[key].ask(f"time {variant} {calls[(key, variant)]}", "block", "failed")
                    except WorkerDied as err:
                        self.died(key, err)
                        continue
                    if answer["kind"] == "failed":
                        record.update(status=answer["status"], message=answer["message"], blocks=[], turns=[])
                        continue
                    record["blocks"].append(answer["times_ms"])
                    record["turns"].append(turn)

    def close(self) -> list[dict]:
        for worker in self.workers.values():
            worker.close()
        return [{**r, "invocation": self.inv} for r in self.records.values()]


def sessions(specs: dict[str, dict], protocol: Protocol, invs: list[int],
             alone: frozenset[str] = frozenset()) -> Iterator[list[dict]]:
    """Invocations `invs`, each in fresh worker processes, their records yielded in order as each ends. The
    invocations' workers all start and prepare at once (start-ups and builds overlap: nothing is timed yet), except
    the workers of `alone` (which time candidate algorithms as they build: times_algorithms), which prepare after
    the others, one at a time; then each invocation's variants are timed in rotating turns while the later invocations'
    workers wait, idle, as a worker of the same invocation waits for the others' turns; then its workers end.
    Records: one per (worker, variant), with `blocks` ([calls' ms] per turn) and `turns`."""
    started, spawned = time.perf_counter(), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vision-protocol-") as tmp:
        pending = [_Invocation(specs, inv, Path(tmp), spawned) for inv in invs]   # all launched before any waited for
        try:
            with affinity.loading([w.proc.pid for invocation in pending for w in invocation.workers.values()]):
                for invocation in pending:
                    invocation.up(alone)
                all_up = time.perf_counter()   # the last one up (the others prepare meanwhile)
                for invocation in pending:
                    invocation.ready([k for k in specs if k not in alone])
                for invocation in pending:
                    for key in [k for k in specs if k in alone and k in invocation.alive]:
                        invocation.alive[key].send("prepare")   # by itself: its choice made on a GPU of its own
                        invocation.ready([key])
            prepared = time.perf_counter()
            worker_phases.add(all_up - started, prepared - all_up)
            together = f" (invocations {', '.join(map(str, invs))} at once)" if len(invs) > 1 else ""
            while pending:
                invocation = pending[0]
                before = time.perf_counter()
                invocation.turns(protocol)
                timed = time.perf_counter()
                if invocation.inv == 0 and protocol.profile_calls > 0:
                    _profile(invocation.alive, invocation.records, protocol.profile_calls, invocation.inv)
                # what the invocation spent outside its turns (start-ups and compiles overlap across workers)
                log.info("invocation %d: workers up and prepared in %.1f s%s (%s), turns %.1f s, profiled pass %.1f s",
                         invocation.inv, prepared - started, together,
                         "; ".join(f"{k}: {v}" for k, v in invocation.phases.items()), timed - before,
                         time.perf_counter() - timed)
                records = pending.pop(0).close()
                yield records
        finally:
            for invocation in pending:   # a consumer that stopped early, or an error: no worker is left running
                invocation.close()


def _profile(alive: dict[str, Worker], records: dict[tuple[str, str], dict], calls: int, inv: int) -> None:
    """The profiled pass of every worker still alive, one after another, once all timed turns are done: each
    ok end-to-end variant's record gets `profile` (measure/profiled.py's columns, status, message). A worker that
    dies in it keeps its timed blocks; its variants' profiles are `error` with its exit status."""
    for key, worker in list(alive.items()):
        names = [v for (k, v), r in records.items() if k == key and v in E2E_VARIANTS and r["status"] == "ok"]
        if not names:
            continue
        try:
            found = worker.ask(f"profile {calls} {' '.join(names)}", "profile")["variants"]
        except WorkerDied as err:
            log.warning("invocation %d: worker %s died in its profiled pass: %s", inv, key, err.message)
            alive.pop(key, None)
            message = f"the worker died in its profiled pass (exit status {err.returncode}): {err.message}"
            found = {v: {"status": err.status if err.status != "ok" else "error", "message": message}
                     for v in names}
        for variant in names:
            records[(key, variant)]["profile"] = found.get(variant) or {
                "status": "error", "message": "the worker's profile answer has no record of this variant"}


def imprecise(by_invocation: list[list[dict]], precision: float) -> bool:
    """Whether some variant's ok invocations do not yet pin its median within `precision`."""
    medians: dict[tuple[str, str], list[float]] = {}
    for records in by_invocation:
        for r in records:
            if r["status"] == "ok" and r["blocks"]:
                medians.setdefault((r["worker"], r["variant"]), []).append(
                    median([t for b in r["blocks"] for t in b]))
    return any(relative_half_width(m) > precision for m in medians.values())


def measure(config: dict, model: str, pair: str, setting: vm.Setting, choices: dict[str, str] | None,
            store: steps.StepStore | None, prefix: str, logger: logging.Logger | None = None) -> list[dict]:
    """Every invocation's records for one setting (kept per invocation in `store`)."""
    logger = logger or log
    section = config["study_b"]["models"]
    protocol = Protocol.from_config(section)
    specs = {}
    for mode in [None, *section["modes"]]:
        case = vm.case_from_config(config, model, pair, mode or section["layer_mode"], setting)
        mine = choices if mode == section["layer_mode"] else None
        specs[worker_key(mode)] = _spec(config, case, CLEAN if mode is None else "compiled", mine, protocol)
    out: list[list[dict]] = []
    inv = 0
    while inv < protocol.max_invocations:
        if inv >= protocol.invocations and not imprecise(out, protocol.precision):
            break
        batch = protocol.batch(inv, first_alone=config["study_b"]["fresh_compile_cache"])
        names = {i: f"{prefix}protocol-{i}" for i in batch}
        kept = set(store.kept()) if store is not None else set()
        fresh = sessions(specs, protocol, [i for i in batch if names[i] not in kept], times_algorithms(config, specs))
        with contextlib.closing(fresh):   # a kill between its invocations ends their workers too
            for i in batch:
                def one():
                    return {"records": next(fresh)}

                records = (one() if store is None else store.step(names[i], one))["records"]
                logger.info("%s on %s, %s: invocation %d: %s", model, pair, prefix or "study setting", i,
                            ", ".join(f"{r['worker']} {r['variant']} {r['status']}" for r in records))
                out.append(records)
        inv += len(batch)
    return [r for records in out for r in records]


# ------------------------------------------------------------------------------------------------- rows
def expected(config: dict, case: vm.Case, choices: dict | None) -> dict[str, list[str]]:
    """worker -> the variants it measures (eager_cuda_graphs only on a CUDA device)."""
    section = config["study_b"]["models"]
    clean = ["eager", *(f"eager_{b}" for b in section["baselines"]
                        if b != "cuda_graphs" or vm.device_of(case).type == "cuda")]
    out = {CLEAN: clean}
    for mode in section["modes"]:
        out[worker_key(mode)] = ["compiled", *((choices or {}) if mode == section["layer_mode"] else {}),
                                 "eager_in_process"]
    return out


def _process(key: str) -> str:
    return CLEAN if key == CLEAN else "compiled"


def _sample_rows(columns: dict, key: str, variant: str, by_inv: dict[int, dict], extra: dict) -> list[dict]:
    """One variant's rows over invocations: a row per timed call, or one row with the record's status."""
    rows = []
    base = {**columns, "variant": variant, **extra, "process": _process(key)}
    for inv, r in sorted(by_inv.items()):
        if r["status"] == "ok" and r["blocks"]:
            rows.extend({**base, "invocation": inv, "round": turn, "repeat": k, "time_ms": t,
                         "warmup_calls": r.get("warmup_calls"), "steady": r.get("steady"), "status": "ok",
                         "message": None}
                        for turn, block in zip(r["turns"], r["blocks"]) for k, t in enumerate(block))
        else:
            status = r["status"] if r["status"] != "ok" else "error"
            rows.append({**base, "invocation": inv, "round": None, "repeat": None, "time_ms": None,
                         "warmup_calls": r.get("warmup_calls"), "steady": r.get("steady"), "status": status,
                         "message": r.get("message") or "no block was timed"})
    return rows


def _build_row(columns: dict, step: str, variant: str, by_inv: dict[int, dict]) -> dict:
    """What building the variant cost in the first invocation that has its record (later ones hit the cache)."""
    from ...tables.common import PHASE_MEASURES
    from ..configurations import COMPILE_COLUMNS
    r = by_inv[min(by_inv)]
    return {**columns, "step": step, "variant": variant, **{c: r.get(c) for c in COMPILE_COLUMNS},
            **{c: 0 if c == "nvml_samples" else None for c in PHASE_MEASURES},
            "status": r["status"] if r["status"] in ("ok", "oom", "wrong_output", "not_run") else "error",
            "message": r.get("message")}


def _profile_row(columns: dict, key: str, variant: str, by_inv: dict[int, dict], calls: int) -> dict:
    """A variant's vision_profile row: its first invocation's profiled pass, or why it has none."""
    inv = min(by_inv)
    r = by_inv[inv]
    row = {**columns, "variant": variant, "process": _process(key), "invocation": inv,
           **dict.fromkeys(PROFILE_COLUMNS)}
    profile = r.get("profile")
    if profile is not None:
        row.update({c: profile.get(c) for c in PROFILE_COLUMNS}, status=profile.get("status", "ok"),
                   message=profile.get("message"))
    elif r["status"] != "ok":
        row.update(status="not_run", message=f"not timed in invocation {inv} ({r['status']}): nothing to profile")
    else:
        row.update(status="not_run", message=f"no profiled pass ({PROFILE_KEY}: {calls})" if calls == 0 else
                   "no profiled pass in its record (kept by an attempt that ran none)")
    return row


def _profile_not_run(case: vm.Case, variant: str, cfg, why: str) -> dict:
    return {**case.columns(cfg), "variant": variant, "process": None, "invocation": None,
            **dict.fromkeys(PROFILE_COLUMNS), "status": "not_run", "message": why}


def rows(config: dict, model: str, pair: str, setting: vm.Setting, records: list[dict],
         chosen: dict[str, tuple[str, float | None]] | None, n_blocks: int) -> dict[str, list[dict]]:
    """vision_e2e, vision_selective, vision_builds and vision_profile rows from the protocol's records. chosen:
    selective variant -> (choice, predicted_ms), None where the oracles have no choice (the selective variants are
    then `missing`).
    A (worker, variant) without a record of an invocation takes its worker's `*` record (the worker died before
    preparing) or is `missing`."""
    section = config["study_b"]["models"]
    layer_mode = section["layer_mode"]
    lcase = vm.case_from_config(config, model, pair, layer_mode, setting)
    want = expected(config, lcase, {v: c for v, (c, _) in (chosen or {}).items()})
    invocations = sorted({r["invocation"] for r in records})
    found: dict[tuple[str, str], dict[int, dict]] = {}
    for key, variants in want.items():
        for variant in variants:
            for inv in invocations:
                r = next((r for r in records if r["invocation"] == inv and r["worker"] == key
                          and r["variant"] in (variant, "*")), None)
                found.setdefault((key, variant), {})[inv] = r or {
                    "status": "missing", "message": f"no record of invocation {inv}"}
    calls = Protocol.from_config(section).profile_calls
    out = {"vision_e2e": [], "vision_selective": [], "vision_builds": [], "vision_profile": []}
    for mode in section["modes"]:
        case = vm.case_from_config(config, model, pair, mode, setting)
        for key, variant in [*((CLEAN, v) for v in want[CLEAN]),
                             (worker_key(mode), "compiled"), (worker_key(mode), "eager_in_process")]:
            cfg = case.compiled if variant == "compiled" else case.eager
            out["vision_e2e"] += _sample_rows(case.columns(cfg), key, variant, found[(key, variant)], {})
            out["vision_builds"].append(_build_row(case.columns(cfg), "e2e", variant, found[(key, variant)]))
            out["vision_profile"].append(_profile_row(case.columns(cfg), key, variant, found[(key, variant)], calls))
        if vm.device_of(case).type != "cuda" and "cuda_graphs" in section["baselines"]:
            why = "eager CUDA graphs need a CUDA device; this pair runs on the CPU"
            out["vision_e2e"].append(_not_run(case, "eager_cuda_graphs", case.eager, why))
            out["vision_profile"].append(_profile_not_run(case, "eager_cuda_graphs", case.eager, why))
            out["vision_builds"].append(_build_row(case.columns(case.eager), "e2e", "eager_cuda_graphs",
                                                   {0: {"status": "not_run", "message": why}}))
    key = worker_key(layer_mode)
    from .selective import VARIANTS
    for variant in ["eager", "compiled", *VARIANTS, "eager_in_process"]:
        cfg = lcase.eager if variant.startswith("eager") else lcase.compiled
        if variant in VARIANTS and chosen is None:
            why = "no oracle choice: the layer measurements of this model and pair did not run or failed"
            out["vision_selective"].append(_not_run(lcase, variant, cfg, why, "missing",
                                                    {"choice": None, "predicted_ms": None}))
            continue
        choice, predicted = (chosen or {}).get(variant, (None, None))
        if variant.startswith("eager"):
            choice = "e" * n_blocks
        w = CLEAN if variant == "eager" else key
        extra = {"choice": choice, "predicted_ms": predicted}
        out["vision_selective"] += _sample_rows(lcase.columns(cfg), w, variant, found[(w, variant)], extra)
        if variant in VARIANTS:
            out["vision_builds"].append(_build_row(lcase.columns(cfg), "selective", variant, found[(w, variant)]))
    return out


def _not_run(case: vm.Case, variant: str, cfg, why: str, status: str = "not_run", extra: dict | None = None) -> dict:
    return {**case.columns(cfg), "variant": variant, **(extra or {}), "process": None, "invocation": None,
            "round": None, "repeat": None, "time_ms": None, "warmup_calls": None, "steady": None,
            "status": status, "message": why}


def not_run_rows(config: dict, model: str, pair: str, setting: vm.Setting, why: str) -> dict[str, list[dict]]:
    """Every row of both steps `not_run` with the reason (the case cannot run here)."""
    section = config["study_b"]["models"]
    out = {"vision_e2e": [], "vision_selective": [], "vision_builds": [], "vision_profile": []}
    from ...tables.common import PHASE_MEASURES
    from ..configurations import COMPILE_COLUMNS
    from .selective import VARIANTS

    def build(case, step, variant, cfg):
        return {**case.columns(cfg), "step": step, "variant": variant, **dict.fromkeys(COMPILE_COLUMNS),
                **{c: 0 if c == "nvml_samples" else None for c in PHASE_MEASURES}, "status": "not_run",
                "message": why}

    for mode in section["modes"]:
        case = vm.case_from_config(config, model, pair, mode, setting)
        for variant in ["eager", "compiled", *(f"eager_{b}" for b in section["baselines"]), "eager_in_process"]:
            cfg = case.compiled if variant == "compiled" else case.eager
            out["vision_e2e"].append(_not_run(case, variant, cfg, why))
            out["vision_builds"].append(build(case, "e2e", variant, cfg))
            out["vision_profile"].append(_profile_not_run(case, variant, cfg, why))
    lcase = vm.case_from_config(config, model, pair, section["layer_mode"], setting)
    for variant in ["eager", "compiled", *VARIANTS, "eager_in_process"]:
        cfg = lcase.eager if variant.startswith("eager") else lcase.compiled
        out["vision_selective"].append(_not_run(lcase, variant, cfg, why, extra={"choice": None,
                                                                                  "predicted_ms": None}))
        out["vision_builds"].append(build(lcase, "selective", variant, cfg))
    return out
