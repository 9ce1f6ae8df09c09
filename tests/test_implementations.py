"""implementations.py is the one list of Study A's implementations: a new entry reaches the config check, the
rules' inputs, the jobs and the report's order without another list to edit."""
import copy
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from abstraction_cost import config as config_module
from abstraction_cost import implementations as im
from abstraction_cost.measure import numerics as nx
from abstraction_cost.report import study_a_backends, study_a_sweep
from abstraction_cost.study_a import cudnn
from abstraction_cost.study_a.comparison import serial as eval_job
from abstraction_cost.study_a.sweep import cells as sweep_cells, native_walk

REPO = Path(__file__).resolve().parents[1]
FAKE = im.Implementation("fake-cpp", "libtorch", "cpp", "a fake", im.EXPERIMENTS, im.CPP_NUMERICS,
                         program="libtorch", native_model="libtorch",
                         artifacts={"backends": "torchscript", "sweep": "aoti-dynamic"})


def smoke() -> dict:
    return yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())


def test_the_registry_knows_every_numerics_the_experiments_allow():
    assert im.ALL_NUMERICS == nx.NUMERICS


def test_every_derived_list_matches_the_registry():
    assert list(eval_job.IMPLEMENTATIONS) == list(im.names("backends"))
    assert cudnn.IMPLEMENTATIONS == ("cudnn", "cudnn-graphs")
    assert eval_job.NATIVE_MODELS == {"torchscript-cpp": "torchscript", "libtorch": "libtorch", "aoti": "aoti"}
    assert native_walk.NATIVE_MODELS["cudnn-graphs"] == "cudnn-graphs"


def test_a_compile_job_name_resolves_to_its_entry_and_mode():
    assert im.split("compiled-max-autotune") == (im.REGISTRY["compiled"], "max-autotune")
    assert sweep_cells.kind("compiled-default") == ("compiled", "python")
    assert sweep_cells.build_kind("compiled-default", "dynamic") == "dynamic"
    assert sweep_cells.build_kind("aoti") == "dynamic" and sweep_cells.build_kind("eager") == "none"
    with pytest.raises(im.UnknownImplementation, match="'compiled-fastest'"):
        im.split("compiled-fastest")


def test_only_a_compile_entry_compiles_as_it_loads():
    """Such a worker's first build is cold, so its job's first invocation prepares alone (InvocationProtocol.batch):
    every torch.compile entry in any mode, and no other implementation (AOTInductor loads a package)."""
    compiling = [j for j in ["eager", "eager-cudagraphs", "torchscript-python", "aoti", "cudnn-graphs",
                             "compiled-default", "compiled-reduce-overhead", "compiled-static-max-autotune"]
                 if im.compiles(j)]
    assert compiling == ["compiled-default", "compiled-reduce-overhead", "compiled-static-max-autotune"]


def test_the_workers_that_time_algorithms_as_they_load_follow_the_jobs_numerics_and_settings():
    """They load alone (sweep/conductor._load): every one under cuDNN's benchmark mode, the hand-written program's
    under cudnnFind, a max-autotune build; none under a plain fp32 job."""
    config = smoke()
    jobs = ["eager", "torchscript-cpp", "libtorch", "cudnn", "cudnn-graphs", "compiled-default",
            "compiled-max-autotune", "compiled-static-max-autotune-no-cudagraphs"]
    searching = lambda c: [j for j in jobs if im.times_algorithms(j, c)]   # noqa: E731
    assert searching(nx.job_config(config, "fp32", "k")) == ["compiled-max-autotune",
                                                              "compiled-static-max-autotune-no-cudagraphs"]
    assert searching(nx.job_config(config, "cudnn-benchmark", "k")) == jobs
    found = copy.deepcopy(config)
    found["study_a"]["cudnn"]["algo"] = "find"
    assert searching(nx.job_config(found, "tf32", "k")) == ["cudnn", "cudnn-graphs", "compiled-max-autotune",
                                                              "compiled-static-max-autotune-no-cudagraphs"]


def test_the_not_run_reason_names_the_gpu_or_the_numerics():
    assert "CUDA GPU" in im.REGISTRY["cudnn"].not_run_reason("fp32", "cpu")
    assert im.REGISTRY["libtorch"].not_run_reason("bf16-autocast", "cuda") == nx.NO_CPP_AUTOCAST
    assert im.REGISTRY["eager"].not_run_reason("bf16-autocast", "cpu") is None


def test_a_fake_implementation_is_refused_by_the_config_check_until_it_is_registered():
    config = smoke()
    config["study_a"]["backends"]["implementations"].append("fake-cpp")
    config["study_a"]["sweep"]["implementations"].append("fake-cpp")
    with pytest.raises(config_module.ConfigError, match="'fake-cpp' is not one of"):
        config_module.validate(copy.deepcopy(config))
    with im.registered(FAKE):
        config_module.validate(copy.deepcopy(config))
        sweep_cells.check(config["study_a"]["sweep"], im.names("sweep"))
        assert "fake-cpp" in sweep_cells.SweepSettings.from_config(config).jobs()
    assert "fake-cpp" not in im.REGISTRY


def test_a_fake_implementation_takes_its_place_in_the_reports_order():
    seen = ["cudnn", "fake-cpp", "eager", "compiled-default", "unknown-thing"]
    with im.registered(FAKE):
        assert im.order(seen) == ["eager", "compiled-default", "cudnn", "fake-cpp", "unknown-thing"]
        assert study_a_sweep._order(seen)[-2:] == ["fake-cpp", "unknown-thing"]
        rows = [{"numerics": "fp32", "implementation": n} for n in ("fake-cpp", "libtorch", "eager")]
        rows.sort(key=lambda r: study_a_backends.implementations.rank(r["implementation"]))
        assert [r["implementation"] for r in rows] == ["eager", "libtorch", "fake-cpp"]


_DRY_RUN = textwrap.dedent("""
    import sys
    from abstraction_cost import implementations as im
    im.REGISTRY["fake-cpp"] = im.Implementation(
        "fake-cpp", "libtorch", "cpp", "a fake", im.EXPERIMENTS, im.CPP_NUMERICS, program="libtorch",
        native_model="libtorch", artifacts={"backends": "torchscript", "sweep": "aoti-dynamic"})
    from snakemake.cli import main
    sys.argv = ["snakemake", *sys.argv[1:]]
    main()
""")


def _job_inputs(dry_run: str, rule: str) -> str:
    """The input line of `rule`'s job in a dry run's output."""
    block = dry_run.split(f"rule {rule}:", 1)[1]
    return next(line for line in block.splitlines() if line.strip().startswith("input:"))


def test_a_fake_implementation_reaches_the_rules_inputs(tmp_path):
    """A dry run of smoke with fake-cpp in both experiments: the eval job of its numerics reads the TorchScript
    module and the libtorch program, and its kernel job the dynamic AOTI package, as its entry says."""
    config = smoke()
    config["study_a"]["backends"]["implementations"] = ["eager", "fake-cpp"]  # what eager lacks is fake-cpp's
    config["study_a"]["sweep"]["implementations"].append("fake-cpp")
    path = tmp_path / "fake.yaml"
    path.write_text(yaml.safe_dump(config))
    script = tmp_path / "run.py"
    script.write_text(_DRY_RUN)
    targets = ["results/study_a/backends/eval/fp32/fake-cpp.rows.parquet",
               "results/study_a/sweep/kernels/fp32/fake-cpp.rows.parquet"]
    run = subprocess.run([sys.executable, str(script), "-s", str(REPO / "Snakefile"), "--cores", "1", "-n",
                          "--configfile", str(path), "-d", str(tmp_path), *targets],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    evaluated = _job_inputs(run.stdout, "eval_backend")  # the job of a numerics: every implementation's inputs
    assert "backends/torchscript/model.pt" in evaluated and "ac_libtorch" in evaluated, evaluated
    swept = _job_inputs(run.stdout, "sweep_kernels_job")
    assert "results/study_a/sweep/aoti" in swept and "model.pt" not in swept, swept
