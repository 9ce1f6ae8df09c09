import copy
import re
import subprocess
import sys

import pytest
import yaml

from abstraction_cost import config as cfg

from tests.fixtures.repository import REPO


@pytest.mark.parametrize("name", ["config", "paper", "smoke", "gpu-smoke"])
def test_shipped_configs_are_valid(name):
    cfg.load(REPO / "config" / f"{name}.yaml")


def _error(config) -> str:
    with pytest.raises(cfg.ConfigError) as info:
        cfg.validate(config)
    return str(info.value)


def test_unknown_key_is_named_with_what_is_allowed(smoke_config):
    smoke_config["study_a"]["training"]["epoch"] = 3
    message = _error(smoke_config)
    assert "config key 'study_a.training'" in message
    assert "['epoch']" in message and "'epochs'" in message


def test_bad_values_name_their_keys(smoke_config):
    bad = copy.deepcopy(smoke_config)
    bad["study_a"]["training"]["epochs"] = 0
    bad["device"] = "tpu"
    bad["study_a"]["training"]["datasets"] = ["imagenet"]
    message = _error(bad)
    assert "'study_a.training.epochs': 0 is less than the minimum of 1" in message
    assert "'device': 'tpu' is not one of ['auto', 'cuda', 'cpu']" in message
    assert "'study_a.training.datasets.0': 'imagenet' is not one of" in message
    bad = copy.deepcopy(smoke_config)
    bad["study_a"]["sweep"]["compile_warm_up"] = "yes"
    bad.setdefault("gpus", {})["take_free_slot_at_start"] = 1
    message = _error(bad)
    assert "'study_a.sweep.compile_warm_up': 'yes' is not of type 'boolean'" in message
    assert "'gpus.take_free_slot_at_start': 1 is not of type 'boolean'" in message


def test_missing_section_is_named(smoke_config):
    del smoke_config["backend_flags"]
    assert "'backend_flags' is a required property" in _error(smoke_config)


def test_the_old_numerics_block_is_refused_naming_its_new_key(smoke_config):
    smoke_config["numerics"] = smoke_config.pop("backend_flags")
    message = _error(smoke_config)
    assert "config key 'numerics'" in message and "backend_flags" in message
    assert "study_a.sweep.numerics" in message  # what `numerics` names now


# Each study's invocation protocol and the schema key that holds it: a key the protocol reads must pass the schema
PROTOCOL_SECTIONS = [("study_a", "sweep"), ("study_a", "backends"), ("study_b", "models")]


@pytest.mark.parametrize("study, section", PROTOCOL_SECTIONS)
def test_every_key_of_the_shared_invocation_protocol_passes_the_schema(smoke_config, study, section):
    """The schema and the protocol's own checks are separate lists; prepare_together was once in the second alone,
    so a config could not turn it off."""
    from abstraction_cost.measure.invocation_protocol import SHARED_RULES
    values = {"invocations": 2, "max_invocations": 3, "precision": 0.05, "blocks": 2, "block_ms": 10,
              "warmup_max": 5, "profile_calls": 0, "prepare_together": False}
    assert set(values) == set(SHARED_RULES)  # a new shared key needs a value here
    smoke_config[study][section].setdefault("protocol", {}).update(values)
    cfg.validate(smoke_config)
    smoke_config[study][section]["protocol"]["prepare_together"] = "no"
    assert f"'{study}.{section}.protocol.prepare_together': 'no' is not of type 'boolean'" in _error(smoke_config)


def test_snakemake_stops_before_any_rule_on_a_bad_config(tmp_path):
    import subprocess
    import sys

    bad = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    bad["measure"]["repeats"] = -1
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", str(path)],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode != 0
    assert "config key 'measure.repeats': -1 is less than the minimum of 1" in result.stdout + result.stderr


def test_training_settings_take_the_per_dataset_batch_size(smoke_config):
    smoke_config["study_a"]["training"]["batch_size_overrides"] = {"digits": 7}
    assert cfg.TrainingSettings.from_config(smoke_config, "digits").batch_size == 7
    assert cfg.TrainingSettings.from_config(smoke_config, "synthetic-cifar10").batch_size == 32


@pytest.mark.parametrize("name,numerics", [("config", ["fp32", "tf32"]), ("paper", ["fp32", "tf32"]),
                                           ("gpu-smoke", ["fp32"]), ("smoke", ["fp32"])])
def test_sweep_numerics_of_the_shipped_configs(name, numerics):
    assert cfg.load(REPO / "config" / f"{name}.yaml")["study_a"]["sweep"]["numerics"] == numerics


def test_bad_sweep_numerics_name_their_key(smoke_config):
    bad = copy.deepcopy(smoke_config)
    bad["study_a"]["sweep"]["numerics"] = ["fp32", "fp16"]
    allowed = "['fp32', 'tf32', 'bf16-autocast', 'cudnn-benchmark']"
    assert f"'study_a.sweep.numerics.1': 'fp16' is not one of {allowed}" in _error(bad)
    bad["study_a"]["sweep"]["numerics"] = ["tf32", "tf32"]
    assert "'study_a.sweep.numerics'" in _error(bad)
    del smoke_config["study_a"]["sweep"]["numerics"]
    message = _error(smoke_config)
    assert "'study_a.sweep'" in message and "'numerics' is a required property" in message


@pytest.mark.parametrize("name", ["config", "paper"])
def test_the_offline_overlay_on_a_full_config_downloads_nothing_and_names_every_dataset_synthetic(name, tmp_path):
    """config/overlays/offline.yaml after a full config, merged by Snakemake itself: a valid config whose every
    dataset is a synthetic stand-in, so the run has no download job."""
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path),
                          "--workflow-profile", "none", "--cores", "4", "--configfile",
                          str(REPO / "config" / f"{name}.yaml"), str(REPO / "config/overlays/offline.yaml")],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    rules = re.findall(r"^(?:local)?rule (\w+):$", run.stdout, flags=re.M)
    datasets = set(re.findall(r"^    wildcards: dataset=([\w-]+)", run.stdout, flags=re.M))
    assert "prepare_dataset" in rules and "download_dataset" not in rules
    assert datasets == {"synthetic-mnist", "synthetic-cifar10", "synthetic-stl10", "synthetic-voc2012"}


def test_the_benchmark_overlays_on_gpu_smoke_make_a_sweep_with_nothing_to_build(tmp_path):
    """benchmarks/overlays/ after gpu-smoke, merged by Snakemake itself (repeatability.py --configfile ... --overlay,
    multi_gpu_scaling.py --config): a valid config whose sweep has only the Python implementations, so no C++ build
    or AOTInductor package runs."""
    overlays = REPO / "benchmarks" / "overlays"
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path),
                          "--workflow-profile", "none", "--cores", "4", "results/study_a/sweep.parquet",
                          "--configfile", str(REPO / "config" / "gpu-smoke.yaml"), str(overlays / "sweep_python.yaml"),
                          str(overlays / "prepare_together_off.yaml"), str(overlays / "warm_up_nice.yaml"),
                          str(overlays / "blocks_min_seconds_off.yaml"), str(overlays / "spread_loads_on.yaml"),
                          str(overlays / "sweep_compile_warm_up_off.yaml"),
                          str(overlays / "take_free_slot_at_start.yaml")],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    rules = set(re.findall(r"^(?:local)?rule (\w+):$", run.stdout, flags=re.M))
    assert "sweep" in rules and not rules & {"build_native", "build_native_cudnn", "package_aoti_sweep",
                                             "compile_cache_sweep"}
