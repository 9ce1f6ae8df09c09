"""Validation of the pipeline's config against workflow/schemas, and typed views of its sections."""
from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import referencing
import yaml

from . import implementations

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "workflow" / "schemas"
ROOT_SCHEMA = "config.schema.yaml"


class ConfigError(ValueError):
    """A config value the schema does not allow; the message names the dotted key."""


# schema file -> {list key: its allowed entries}: the lists implementations.py owns, filled into the schemas here
# so that they are spelled out once.
REGISTRY_ENUMS = {
    "study_a_backends.schema.yaml": {"implementations": lambda: implementations.names("backends")},
    "study_a_sweep.schema.yaml": {"implementations": lambda: implementations.names("sweep"),
                                  "compile_modes": lambda: implementations.COMPILE_MODES,
                                  "static_compile_modes": lambda: implementations.COMPILE_MODES},
}


def _with_registry(name: str, contents: dict) -> dict:
    for key, allowed in REGISTRY_ENUMS.get(name, {}).items():
        contents["properties"][key]["items"] = {"enum": list(allowed())}
    return contents


def _registry(schema_dir: Path) -> referencing.Registry:
    resources = []
    for path in sorted(schema_dir.glob("*.schema.yaml")):
        contents = _with_registry(path.name, yaml.safe_load(path.read_text()))
        resources.append((path.name, referencing.Resource.from_contents(
            contents, default_specification=referencing.jsonschema.DRAFT202012)))
    return referencing.Registry().with_resources(resources)


def _describe(error: jsonschema.ValidationError) -> str:
    key = ".".join(str(p) for p in error.absolute_path) or "<top level>"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        return f"config key '{key}': unknown key(s) {extra}; allowed: {allowed}"
    if error.validator == "enum":
        return f"config key '{key}': {error.instance!r} is not one of {error.validator_value}"
    return f"config key '{key}': {error.message}"


def validate(config: dict, schema_dir: Path = SCHEMA_DIR) -> None:
    """Raise ConfigError listing every violation, each naming its key and what is allowed."""
    if isinstance(config.get("numerics"), dict):
        raise ConfigError("invalid config:\n  config key 'numerics': the block of TF32 and cudnn.benchmark switches is "
                          "now 'backend_flags' ({tf32, cudnn_benchmark}); 'numerics' names only the axis of "
                          "study_a.backends.numerics, study_a.sweep.numerics and study_b.models.numerics")
    registry = _registry(schema_dir)
    schema = registry.contents(ROOT_SCHEMA)
    validator = jsonschema.Draft202012Validator(schema, registry=registry)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(_describe(e) for e in errors))


def load(path: str | Path) -> dict:
    """Read and validate a config file; ConfigError names the file (and line) or the key at fault."""
    try:
        config = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f", line {where.line + 1} column {where.column + 1}" if where else ""
        raise ConfigError(f"{path}{line}: not valid YAML ({getattr(err, 'problem', None) or err})") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the config ({err.strerror or err})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: a config is a YAML mapping of keys (device, seed, ...), "
                          f"got {type(config).__name__}")
    validate(config)
    return config


def config_hash(config: dict) -> str:
    """Short stable hash of the whole config, recorded with every run."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class TrainingSettings:
    """Hyperparameters of one Study A training run, shared by every backend."""

    epochs: int
    batch_size: int
    eval_batch_size: int
    lr: float
    momentum: float
    weight_decay: float

    @classmethod
    def from_config(cls, config: dict, dataset: str) -> "TrainingSettings":
        t = config["study_a"]["training"]
        return cls(
            epochs=t["epochs"],
            batch_size=t["batch_size_overrides"].get(dataset, t["batch_size"]),
            eval_batch_size=t["eval_batch_size"],
            lr=t["optimizer"]["lr"],
            momentum=t["optimizer"]["momentum"],
            weight_decay=t["optimizer"]["weight_decay"],
        )


def main(argv: list[str]) -> int:
    """`python -m abstraction_cost.config FILE...`: check configs before a run; exit 1 naming each bad key."""
    if not argv:
        print("usage: python -m abstraction_cost.config FILE [FILE...]", file=sys.stderr)
        return 2
    bad = 0
    for path in argv:
        try:
            load(path)
            print(f"{path}: ok")
        except ConfigError as err:
            bad += 1
            print(f"{path}: {err}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
