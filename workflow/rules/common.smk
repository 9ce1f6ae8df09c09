# What every rules file shares, and the only place it is defined: config validation, wildcard constraints, the
# paths more than one rules file (or the report) reads, the TABLES registry, and the input functions. A rules file
# defines names of its own only for itself, so each reads alone beside this one (tests/test_rules.py checks it).
# Job resources of timing rules come from gpu_slots.smk, included here.
import json
import sys
from pathlib import Path

from snakemake.logging import logger

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

# No module the rules files import imports torch or torchvision: that took seconds at every Snakemake start (and
# every cluster job's). tests/test_rules.py builds the DAG with a torch that cannot be imported.
from abstraction_cost import config as config_module
from abstraction_cost import implementations as _implementations
from abstraction_cost import run_guard
from abstraction_cost import torch_version as _torch_version
from abstraction_cost.programs import native as _native
from abstraction_cost.study_a.sweep.cells import Protocol as _Protocol, SweepSettings as _SweepSettings
from abstraction_cost.study_a.sweep import kernel_point as _kernel_point
from abstraction_cost.study_b.blocks import registry as _block_registry
from abstraction_cost.study_b.blocks.registry import EXPERIMENTS as BLOCK_EXPERIMENTS
from abstraction_cost.data import specs as dataset_specs
from abstraction_cost.measure import device_check
from abstraction_cost.tables.study_b_models import JOB_TABLES as VISION_JOB_TABLES

# Before any job: the config, the folders it writes, and one run per directory (run_guard).
try:
    config_module.validate(config)
    run_guard.check_writable({"results": "results", "logs": "logs", "data.root": config["data"]["root"]})
    _cleared = run_guard.claim(main_process=workflow.is_main_process)
except (config_module.ConfigError, run_guard.RunGuardError) as err:
    raise WorkflowError(str(err)) from None
if _cleared:
    logger.warning(_cleared)


include: "gpu_slots.smk"


onstart:
    # The device the config names, once jobs are about to run here: not in a dry run, and not where jobs run
    # elsewhere (a cluster's login node has no GPU of its own).
    if workflow.resource_settings.nodes is None:
        try:
            device_check.require(config)
        except device_check.DeviceUnavailable as err:
            raise WorkflowError(str(err)) from None


# Global, so that they bind in every rules file whatever the include order.
wildcard_constraints:
    dataset="|".join(dataset_specs.ALL),
    repeat=r"\d+",
    seed=r"\d+",
    model="|".join(["alexnet", "resnet50", "mobilenet_v2", "googlenet", "squeezenet1_1", "densenet121"]),
    pair="cpu|gpu",


# The software of every rule (the pins of envs/requirements.txt), which the Snakefile gives to each.
SOFTWARE = f"{workflow.basedir}/envs/environment.yaml"
TORCH_VERSION = _torch_version.read()  # as a param, a different torch reruns what depends on it


# What measure.run.measured_run reads for every measuring job: the device, its backend flags (TF32,
# cudnn.benchmark), the NVML interval (and a job's warm-up and repeats), and the seed.
MEASURED = ("device", "seed", "backend_flags", "measure")


def reads(*keys, but=()):
    """The config a rule's jobs read (dotted keys), as one param: params are a rerun trigger, so a change of any
    of them reruns exactly those jobs. `but`: keys under them that say which jobs exist (lists of datasets,
    implementations, pairs), not what one job does. Sorted JSON, so that a config's key order does not matter."""
    found = {}
    for key in keys:
        value = config
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        found[key] = value
    found = json.loads(json.dumps(found))  # a copy to drop keys from
    for key in but:
        section = next(k for k in keys if key.startswith(f"{k}."))
        value = found[section]
        *path, last = key.removeprefix(f"{section}.").split(".")
        for part in path:
            value = value.get(part, {})
        value.pop(last, None)
    return json.dumps(found, sort_keys=True)


def seeds(section):
    return [config["seed"] + r for r in range(section["repeats"])]


def env_sidecar(table_path):
    """For each table T written by a concat rule, its jobs' environment rows land beside it as T.env.parquet."""
    return str(table_path).replace(".parquet", ".env.parquet")


# --- data (data.smk): one prepared copy per dataset, init weights per (dataset, init, seed), sample orders ---
DATA_ROOT = config["data"]["root"]
PREPARED_DIR = "results/data/prepared"
PREPARED = f"{PREPARED_DIR}/{{dataset}}"
INIT_WEIGHTS = "results/data/init/{dataset}/{init}-seed{seed}.weights"
SAMPLE_ORDER = "results/data/order/{dataset}/seed{seed}-epochs{epochs}.i32"

# --- Study A ---
TRAINING = config["study_a"]["training"]
TRAINING_ORDER = SAMPLE_ORDER.replace("{epochs}", str(TRAINING["epochs"]))  # every training job's sample order
BACKENDS = config["study_a"]["backends"]
BACKENDS_DIR = "results/study_a/backends"
BACKENDS_WEIGHTS = INIT_WEIGHTS.format(dataset=BACKENDS["dataset"], init=BACKENDS["init"], seed=config["seed"])
TORCHSCRIPT_MODULE = f"{BACKENDS_DIR}/torchscript/model.pt"
TORCHSCRIPT_META = f"{BACKENDS_DIR}/torchscript/meta.json"
SWEEP = _SweepSettings.from_config(config)  # refuses a bad grid, transfer or implementation, naming the key
SWEEP_PROTOCOL = _Protocol.from_config(config["study_a"]["sweep"])
SWEEP_DIR = "results/study_a/sweep"
SWEEP_JOBS = SWEEP.jobs()
# The interleaved sweep's compile warm-ups (study_a/sweep/compile_warm_up.py): one per job with a torch.compile entry
SWEEP_CACHE_DIR = (f"{SWEEP_DIR}/compile-cache/" if SWEEP_PROTOCOL.mode == "interleaved"
                   and config["study_a"]["sweep"].get("compile_warm_up", True)
                   and any(_implementations.compiles(job) for job in SWEEP_JOBS) else None)
# the kernel table from the interleaved sweep's profiled pass of its kernel point, else from jobs of its own
KERNELS_FROM_SWEEP = SWEEP_PROTOCOL.mode == "interleaved" and _kernel_point.read_from_sweep(
    SWEEP, SWEEP_PROTOCOL.profile_calls)
# The C++ programs, built in the repository's native/build/ (git-ignored) whatever the working directory.
LIBTORCH_PROGRAM = str(_native.program_path("libtorch"))
CUDNN_PROGRAM = str(_native.program_path("cudnn"))
PROGRAMS = {"libtorch": LIBTORCH_PROGRAM, "cudnn": CUDNN_PROGRAM}  # implementations.py's program names
EVAL_IMPLEMENTATIONS = _implementations.names("backends")
NATIVE_SOURCES = {program: [str(p) for p in _native.sources(program)] for program in ("libtorch", "cudnn")}

# --- Study B ---
STUDY_B_CACHE_DIR = None if config["study_b"]["fresh_compile_cache"] else "results/study_b/compile-cache/"
STUDY_B_WARM_UPS = "results/study_b/compile-cache-manifests"  # one warm-up manifest per Study B timing job
BLOCK_DIR = "results/study_b/blocks"
VISION_DIR = "results/study_b/models"
VISION_SUMMARIES = ("vision_speedups", "vision_timing_summary", "vision_layer_summary", "vision_selective_summary",
                    "vision_eager_baselines")

# Every whole table the report reads, by table name (tables.SCHEMAS): measured tables, whose jobs' environment
# rows sit beside them (env_sidecar), and SUMMARIES, computed from them by a rule without measuring.
TABLES = {"training": "results/study_a/training.parquet"}
for _name in (*VISION_JOB_TABLES, *VISION_SUMMARIES):
    TABLES[_name] = f"{VISION_DIR}/{_name}.parquet"
for _name, _exp in BLOCK_EXPERIMENTS.items():
    TABLES[_exp.table] = f"{BLOCK_DIR}/{_name}.parquet"
    if _exp.speedup_table is not None:
        TABLES[_exp.speedup_table] = f"{BLOCK_DIR}/{_name}.speedups.parquet"
TABLES["study_b_resnet50_conv_speedups"] = f"{BLOCK_DIR}/resnet50_convs.speedups.parquet"
TABLES.update(backend_eval="results/study_a/backend_eval.parquet",
              backend_comparison="results/study_a/backend_comparison.parquet",
              sweep="results/study_a/sweep.parquet", sweep_kernels="results/study_a/sweep_kernels.parquet")

TABLES["flops"] = "results/derived/flops.parquet"  # counted, not timed, but with an environment row of its own

SUMMARIES = {
    "training_curve": "results/study_a/training_curve.parquet",
    "training_summary": "results/study_a/training_summary.parquet",
    "sweep_h2d": "results/study_a/sweep_h2d.parquet",
}
if SWEEP_PROTOCOL.mode == "interleaved":  # run_ids: the sweep's
    SUMMARIES.update(sweep_blocks="results/study_a/sweep_blocks.parquet",
                     sweep_speedups="results/study_a/sweep_speedups.parquet",
                     sweep_profile="results/study_a/sweep_profile.parquet")
if (BACKENDS.get("protocol") or {}).get("mode", "interleaved") == "interleaved":  # its eval jobs' profiled pass
    SUMMARIES["backend_profile"] = "results/study_a/backend_profile.parquet"
# computed from whole tables for the report's figures (derived.smk)
DERIVED = {
    "precision": "results/derived/precision.parquet",
    "energy": "results/derived/energy.parquet",
    "compile_breakeven": "results/derived/compile_breakeven.parquet",
    "vision_oracle_curve": "results/derived/vision_oracle_curve.parquet",
    "conv_predictor": "results/derived/conv_predictor.parquet",
    "conv_predictor_summary": "results/derived/conv_predictor_summary.parquet",
    "decomposition": "results/derived/decomposition.parquet",
    "roofline": "results/derived/roofline.parquet",
}
ENVIRONMENT = "results/environment.parquet"
# Every table the report reads: passed to it as JSON (report/page.py), named only here.
REPORT_TABLES = {**TABLES, **SUMMARIES, **DERIVED, "environment": ENVIRONMENT}
# Every prepared dataset the run reads (training's, and the sweep's images): the report lists failed downloads.
REPORT_DATASETS = {name: f"{PREPARED_DIR}/{name}"
                   for name in sorted({*config["study_a"]["training"]["datasets"], BACKENDS["dataset"]})}


# --- input functions ---
def prepare_source(wildcards):
    """What a prepared dataset is made from: its download record, or the code that generates an offline one (an
    input either way, so that a damaged prepared dataset made older than it is prepared again)."""
    if dataset_specs.spec(wildcards.dataset, config).downloads:
        return f"{DATA_ROOT}/{wildcards.dataset}/download.json"
    return str(Path(workflow.basedir) / "src" / "abstraction_cost" / "data" / "offline.py")


def training_parts(kind):
    """Every training job's part (kind rows or env) of the training table."""
    return expand(
        "results/study_a/train/{backend}/{dataset}/{init}/seed{seed}.{kind}.parquet",
        backend=TRAINING["backends"], dataset=TRAINING["datasets"], init=TRAINING["inits"],
        seed=seeds(TRAINING), kind=kind,
    )


def artifact_inputs(artifact, experiment):
    """The named inputs of an artifact (implementations.py's artifacts) that a job of `experiment` reads."""
    if artifact == "torchscript":
        meta = {"meta": TORCHSCRIPT_META} if experiment == "backends" else {}
        return {"module": TORCHSCRIPT_MODULE, **meta}
    if artifact in ("aoti", "aoti-dynamic"):
        return {"package": f"{BACKENDS_DIR}/aoti" if artifact == "aoti" else f"{SWEEP_DIR}/aoti"}
    if artifact is None:
        return {}
    raise WorkflowError(f"implementations.py names artifact {artifact!r}, which no rule makes")


def inputs_of(implementation, experiment, images):
    """What a job of `experiment` that runs `implementation` of Study A on `images` (a dict of named inputs)
    reads, from its registry entry (implementations.py): the init weights, its artifact and its program."""
    impl = _implementations.get(implementation)
    found = {**images, "weights": BACKENDS_WEIGHTS, **artifact_inputs(impl.artifacts.get(experiment), experiment)}
    if impl.program is not None:
        found["program"] = PROGRAMS[impl.program]
    return found


def backend_eval_inputs(wildcards):
    """Every implementation's inputs, for the backend comparison's one eval job of a numerics; the programs as
    program_libtorch and program_cudnn."""
    found = {}
    for implementation in BACKENDS["implementations"]:
        for key, path in inputs_of(implementation, "backends", {"input": f"{BACKENDS_DIR}/input"}).items():
            if key == "program":
                key = f"program_{_implementations.get(implementation).program}"
            found[key] = path
    return found


def sweep_inputs_of(implementation):
    return inputs_of(implementation, "sweep", {"inputs": f"{SWEEP_DIR}/inputs"})


def sweep_job_inputs(wildcards):
    return sweep_inputs_of(wildcards.implementation)


def sweep_interleaved_inputs():
    """Every sweep implementation's inputs, for the one interleaved job of a numerics; the programs as
    program_libtorch and program_cudnn."""
    inputs = {}
    for implementation in SWEEP_JOBS:
        for key, path in sweep_inputs_of(implementation).items():
            inputs[f"program_{Path(path).parent.name}" if key == "program" else key] = path
    return inputs


def derived_inputs(*names):
    """Whole tables (TABLES or SUMMARIES) by name, as a derived table's named inputs."""
    return {name: {**TABLES, **SUMMARIES}[name] for name in names}


def sweep_warm_up(wildcards):
    """An interleaved sweep job's own compile warm-up (its manifest); none where no entry compiles, with
    study_a.sweep.compile_warm_up false, or for a job that measures nothing here."""
    if SWEEP_CACHE_DIR is None or measures_nothing("sweep", wildcards):
        return {}
    return {"warm_up": f"{SWEEP_DIR}/compile-cache-manifests/{wildcards.numerics}-shard{wildcards.shard}.json"}


def block_warm_up(wildcards):
    """A building-block timing job's own compile warm-up (its manifest); none with fresh_compile_cache, or for a
    job that certainly compiles nothing (device cpu: the gpu pair, a mode the CPU lacks; a job that measures
    nothing here)."""
    w = wildcards
    if STUDY_B_CACHE_DIR is None or measures_nothing("study_b_block_timing", w) or (
            DEVICE == "cpu" and _block_registry.job_not_run_reason(config, w.pair, w.mode, False, False)):
        return []
    return f"{STUDY_B_WARM_UPS}/blocks/{w.experiment}/{w.pair}-{w.mode}.json"


def vision_warm_up(wildcards):
    """A vision_model job's own compile warm-up (its manifest); none with fresh_compile_cache, for the gpu
    pair of device cpu, or for a job that measures nothing here."""
    if STUDY_B_CACHE_DIR is None or (DEVICE == "cpu" and wildcards.pair == "gpu") or measures_nothing(
            "vision_model", wildcards):
        return []
    return f"{STUDY_B_WARM_UPS}/models/{wildcards.pair}/{wildcards.model}.json"


def block_parts(experiment, kind):
    """Every timing job's part (kind rows or env) of one building-block experiment's table."""
    section = config["study_b"]["blocks"][BLOCK_EXPERIMENTS[experiment].config_key]
    return expand(f"{BLOCK_DIR}/{experiment}/{{pair}}-{{mode}}.{kind}.parquet",
                  pair=section["pairs"], mode=section["modes"])


def block_config(experiment):
    """What one building-block experiment's timing jobs read: its own section, the blocks' timing settings."""
    key = f"study_b.blocks.{BLOCK_EXPERIMENTS[experiment].config_key}"
    return reads(*MEASURED, "study_b.blocks.require_gpu", "study_b.blocks.timing", key,
                 but=(f"{key}.pairs", f"{key}.modes"))


# What a vision_model job reads (and its warm-up, which compiles the same graphs).
VISION_CONFIG = reads(*MEASURED, "study_b.models", but=("study_b.models.models", "study_b.models.bootstrap"))


def vision_cases():
    return [(model, pair) for pair, models in config["study_b"]["models"]["models"].items() for model in models]


def vision_parts(table):
    """Every vision_model job's part of one vision table, and the jobs' environment rows."""
    return dict(tables=[f"{VISION_DIR}/jobs/{pair}/{model}/{table}.parquet" for model, pair in vision_cases()],
                envs=[f"{VISION_DIR}/jobs/{pair}/{model}/environment.parquet" for model, pair in vision_cases()])
