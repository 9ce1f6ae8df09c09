"""Every output table's schema, and the one writer.

A table is a parquet file whose columns are exactly its declared schema, in order. Schemas live in one module
per domain (common, study_a, ...) and are collected into SCHEMAS here; `write` is the only way a table reaches
disk: it checks the columns, casts to the declared types and renames a finished temporary file into place.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Iterable, Mapping

import polars as pl

from .. import faults
from . import (common, derived, study_a, study_a_backends, study_a_summary, study_a_sweep, study_b_blocks,
               study_b_models)

SCHEMAS: dict[str, dict[str, pl.DataType]] = {}
for _module in (common, study_a, study_a_backends, study_a_summary, study_a_sweep, study_b_blocks, study_b_models,
                derived):
    for _name, _schema in _module.SCHEMAS.items():
        if _name in SCHEMAS:
            raise RuntimeError(f"table {_name!r} declared twice")
        SCHEMAS[_name] = {"run_id": pl.String, **_schema}


class SchemaError(ValueError):
    """Rows that do not match their table's declared schema."""


class TableWriteError(OSError):
    """A table could not be written (a full disk, a read-only folder); nothing of it is left on disk."""


def schema(table: str) -> dict[str, pl.DataType]:
    try:
        return SCHEMAS[table]
    except KeyError:
        raise SchemaError(f"unknown table {table!r}; declared tables: {sorted(SCHEMAS)}") from None


def frame(table: str, rows: Iterable[Mapping] | pl.DataFrame) -> pl.DataFrame:
    """Rows as a DataFrame with exactly the table's columns and types; raises SchemaError otherwise."""
    declared = schema(table)
    df = rows if isinstance(rows, pl.DataFrame) else pl.DataFrame(list(rows), schema_overrides=None, infer_schema_length=None)
    if df.width == 0:
        return pl.DataFrame(schema=declared)
    missing = [c for c in declared if c not in df.columns]
    extra = [c for c in df.columns if c not in declared]
    if missing or extra:
        raise SchemaError(f"table {table!r}: missing columns {missing}, undeclared columns {extra}")
    try:
        return df.select([pl.col(c).cast(t, strict=True) for c, t in declared.items()])
    except pl.exceptions.PolarsError as err:
        raise SchemaError(f"table {table!r}: {err}") from err


def write(table: str, rows: Iterable[Mapping] | pl.DataFrame, path: str | os.PathLike) -> pl.DataFrame:
    """Validate rows against the table's schema and write them atomically to path."""
    df = frame(table, rows)
    if df.height and df["run_id"].null_count():
        raise SchemaError(f"table {table!r}: every row needs a run_id")
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in path.parent.glob(f".{path.name}.tmp-*"):   # a killed writer's half file
            stale.unlink(missing_ok=True)
        df.write_parquet(tmp)
        faults.table_write(table, tmp)
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        hint = ("free space on that disk" if err.errno in (errno.ENOSPC, errno.EDQUOT)
                else "make its folder writable")
        raise TableWriteError(err.errno, f"table {table!r} not written to {path}: {err.strerror or err}; "
                              f"{hint} and rerun (finished jobs are kept)") from err
    return df


def read(table: str, path: str | os.PathLike) -> pl.DataFrame:
    """Read a table, checking it still has its declared schema."""
    return frame(table, pl.read_parquet(path))


def concat(table: str, paths: Iterable[str | os.PathLike], out: str | os.PathLike) -> pl.DataFrame:
    """Concatenate per-job parts of one table into the whole table."""
    parts = [read(table, p) for p in paths]
    return write(table, pl.concat(parts) if parts else pl.DataFrame(schema=schema(table)), out)
