import polars as pl
import pytest

from abstraction_cost import tables


def _row(**over):
    row = dict.fromkeys(tables.schema("training"))
    row.update(run_id="r1", backend="eager", dataset="digits", init="zero-gamma", repeat=0, seed=0, epoch=0,
               phase="train", status="ok", loss=0.5, accuracy=0.9, samples=10)
    row.update(over)
    return row


def test_every_table_has_run_id_first_and_snake_case_columns():
    for name, schema in tables.SCHEMAS.items():
        assert next(iter(schema)) == "run_id", name
        for column in schema:
            assert column == column.lower() and " " not in column, (name, column)


def test_write_then_read_round_trip(tmp_path):
    path = tmp_path / "t.parquet"
    tables.write("training", [_row(), _row(epoch=1)], path)
    df = tables.read("training", path)
    assert df.height == 2 and df.schema == pl.Schema(tables.schema("training"))
    assert not list(tmp_path.glob(".*tmp*")), "temporary file left behind"


def test_missing_and_undeclared_columns_are_named(tmp_path):
    row = _row(extra_ms=1.0)
    del row["loss"]
    with pytest.raises(tables.SchemaError, match=r"missing columns \['loss'\], undeclared columns \['extra_ms'\]"):
        tables.write("training", [row], tmp_path / "t.parquet")
    assert not (tmp_path / "t.parquet").exists()


def test_a_value_of_the_wrong_type_is_refused(tmp_path):
    with pytest.raises(tables.SchemaError, match="training"):
        tables.write("training", [_row(epoch="first")], tmp_path / "t.parquet")


def test_rows_need_a_run_id(tmp_path):
    with pytest.raises(tables.SchemaError, match="run_id"):
        tables.write("training", [_row(run_id=None)], tmp_path / "t.parquet")


def test_unknown_table_is_named():
    with pytest.raises(tables.SchemaError, match="unknown table 'trainnig'"):
        tables.schema("trainnig")


def test_concat_of_no_parts_writes_an_empty_table_with_the_schema(tmp_path):
    df = tables.concat("training", [], tmp_path / "t.parquet")
    assert df.height == 0 and list(df.columns) == list(tables.schema("training"))
