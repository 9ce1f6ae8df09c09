# Validation of the config, the registry of tables, and helpers shared by every rules file.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from abstraction_cost import config as config_module
from abstraction_cost.data import specs as dataset_specs

try:
    config_module.validate(config)
except config_module.ConfigError as err:
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
