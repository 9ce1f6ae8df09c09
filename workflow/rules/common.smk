# Validation of the config, the registry of tables, and helpers shared by every rules file.
import sys
from pathlib import Path

from snakemake.logging import logger

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from abstraction_cost import config as config_module
from abstraction_cost import run_guard
from abstraction_cost.data import specs as dataset_specs
from abstraction_cost.measure import device as device_check

# Before any job: the config, the folders it writes, and one run per directory (run_guard).
try:
    config_module.validate(config)
    run_guard.check_writable({"results": "results", "logs": "logs", "data.root": config["data"]["root"]})
    _cleared = run_guard.claim(main_process=workflow.is_main_process)
except (config_module.ConfigError, run_guard.RunGuardError) as err:
    raise WorkflowError(str(err)) from None
if _cleared:
    logger.warning(_cleared)


onstart:
    # The device the config names, once jobs are about to run here: not in a dry run, and not where jobs run
    # elsewhere (a cluster's login node has no GPU of its own).
    if workflow.resource_settings.nodes is None:
        try:
            device_check.require(config)
        except device_check.DeviceUnavailable as err:
            raise WorkflowError(str(err)) from None


wildcard_constraints:
    dataset="|".join(dataset_specs.ALL),
    repeat=r"\d+",
    seed=r"\d+",


# Every whole table the report reads, by table name (tables.SCHEMAS). Each rules file adds its own; for each
# table T written by rule `concat_tables`, its jobs' environment rows land beside it as T.env.parquet.
TABLES = {}


def env_sidecar(table_path):
    return str(table_path).replace(".parquet", ".env.parquet")


def seeds(section):
    return [config["seed"] + r for r in range(section["repeats"])]
