"""The report's computations and page helpers: Study A curve and summary, environment, failures, tables, charts."""
from __future__ import annotations

import html
import json
import re

import polars as pl
import pytest

from abstraction_cost import tables
from abstraction_cost.report import page, sections, study_a
from abstraction_cost.study_a.sweep import summary as sweep_summary
from abstraction_cost.study_a.training import summary as training_summary
from tests.fixtures.report_rows import NOT_RUN_MESSAGE, environment_rows, training_rows


@pytest.fixture(autouse=True)
def fresh_page(monkeypatch):
    monkeypatch.setattr(page, "_requested", set())
    monkeypatch.setattr(page, "_unreadable", {})
    monkeypatch.delenv(page.TABLES_ENV, raising=False)


def row(df: pl.DataFrame, **keys) -> dict:
    matched = df.filter(*[pl.col(k) == v for k, v in keys.items()])
    assert matched.height == 1, (keys, matched)
    return matched.row(0, named=True)


# ------------------------------------------------------------------------------------------ Study A
def test_training_curve_means_bands_and_time_axis():
    curve = training_summary.training_curve(training_rows())
    assert curve.columns == list(tables.schema("training_curve"))
    # 2 backends × 2 datasets × 1 init × 3 epochs; the not_run rows give no point
    assert curve.height == 12 and set(curve["backend"]) == {"eager", "libtorch"}
    point = row(curve, backend="eager", dataset="digits", epoch=2)
    assert point["repeats"] == 2
    assert point["accuracy_min"] == pytest.approx(0.7) and point["accuracy_max"] == pytest.approx(0.71)
    assert point["accuracy_mean"] == pytest.approx(0.705)
    assert point["epoch_time_s_mean"] == pytest.approx(2.0)
    assert point["time_s"] == pytest.approx(6.0)            # (epoch + 1) × mean epoch time
    assert row(curve, backend="libtorch", dataset="digits", epoch=0)["time_s"] == pytest.approx(1.0)
    assert point["run_id"].split(",") == sorted(["eager-digits-kaiming-normal-fan-out-0",
                                                  "eager-digits-kaiming-normal-fan-out-1"])


def test_training_summary_per_backend_dataset_init():
    summary = training_summary.training_summary(training_rows())
    assert summary.columns == list(tables.schema("training_summary"))
    assert summary.height == 6                               # 3 backends (one not run) × 2 datasets
    eager = row(summary, backend="eager", dataset="digits")
    assert (eager["repeats_ok"], eager["repeats_not_run"], eager["repeats_missing"], eager["repeats_failed"],
            eager["epochs"]) == (2, 0, 0, 0, 3)
    assert eager["final_accuracy_mean"] == pytest.approx(0.705)
    assert (eager["final_accuracy_min"], eager["final_accuracy_max"]) == pytest.approx((0.7, 0.71))
    # 20, 40, 60 ms per epoch in each repeat: the cold first epoch apart from the steady state's median
    assert eager["train_time_per_sample_ms_first"] == pytest.approx(20.0)
    assert eager["train_time_per_sample_ms_steady"] == pytest.approx(50.0)
    assert eager["eval_time_per_sample_ms_first"] == pytest.approx(5.0)
    assert eager["eval_time_per_sample_ms_steady"] == pytest.approx(12.5)
    one_epoch = training_summary.training_summary(training_rows(epochs=1))
    assert one_epoch["train_time_per_sample_ms_steady"].null_count() == one_epoch.height
    assert eager["epoch_time_s_mean"] == pytest.approx(2.0)
    assert eager["mem_used_mib_max"] == 1200.0 and eager["alloc_peak_mib_max"] == 501.0
    assert eager["gpu_util_train_mean_pct"] == 90.0           # train phases only, not the eval's 50
    cudnn = row(summary, backend="cudnn", dataset="digits")
    assert (cudnn["repeats_ok"], cudnn["repeats_not_run"], cudnn["repeats_failed"]) == (0, 1, 0)  # not a failure
    assert cudnn["final_accuracy_mean"] is None and cudnn["epochs"] is None


def test_summaries_write_as_tables(tmp_path):
    training = training_rows()
    tables.write("training_curve", training_summary.training_curve(training), tmp_path / "c.parquet")
    tables.write("training_summary", training_summary.training_summary(training), tmp_path / "s.parquet")
    assert tables.read("training_summary", tmp_path / "s.parquet").height == 6


def test_summaries_of_empty_or_failed_training_are_empty_or_failed():
    empty = pl.DataFrame(schema=tables.schema("training"))
    assert training_summary.training_curve(empty).is_empty() and training_summary.training_summary(empty).is_empty()
    only_failed = training_rows(backends=(), not_run_backend="eager")
    assert training_summary.training_curve(only_failed).is_empty()
    assert training_summary.training_summary(only_failed)["repeats_not_run"].to_list() == [1, 1]


def test_training_figure_panels_lines_bands():
    assert study_a.training_figure(training_summary.training_curve(training_rows(backends=()))) is None
    spec = study_a.training_figure(training_summary.training_curve(training_rows())).to_dict()
    assert spec["facet"]["column"]["field"] == "dataset"
    assert spec["resolve"]["scale"]["x"] == "independent"
    band, line = spec["spec"]["layer"]
    assert band["mark"]["type"] == "area" and band["encoding"]["y2"]["field"] == "accuracy_max"
    assert line["mark"]["type"] == "line" and line["encoding"]["color"]["field"] == "backend"
    assert "strokeDash" not in line["encoding"]               # one init scheme: no dashes
    values = next(iter(spec["datasets"].values()))
    assert len(values) == 12 and {"time_s", "accuracy_mean"} <= set(values[0])


def test_training_figure_dashes_init_schemes_when_several():
    curve = training_summary.training_curve(training_rows(inits=("pytorch-default", "zero-gamma")))
    line = study_a.training_figure(curve).to_dict()["spec"]["layer"][1]
    assert line["encoding"]["strokeDash"]["field"] == "init"


def test_summary_display_shows_accuracy_range():
    shown = study_a.summary_display(training_summary.training_summary(training_rows()))
    eager = row(shown, backend="eager", dataset="digits")
    assert eager["final eval accuracy"] == "0.705 [0.700–0.710]"
    assert eager["repeats"] == "2 ok"
    assert row(shown, backend="cudnn", dataset="digits")["repeats"] == "0 ok, 1 not_run"
    assert row(shown, backend="cudnn", dataset="digits")["final eval accuracy"] is None


# --------------------------------------------------------------------------------------- sections
def test_environment_summary_one_environment_with_state_ranges():
    env = environment_rows(["a", "b", "c"])
    shown = dict(sections.environment_summary(env).iter_rows())
    assert shown["GPU"] == "NVIDIA H100 80GB HBM3" and shown["jobs"] == "3"
    assert shown["git revision"] == "0123456789ab"
    assert shown["SM clock (MHz) before → after"] == "1978–1980 → 1755"
    assert shown["temperature (°C) before → after"] == "35 → 60–62"
    assert shown["throttle reasons after"] == "sw_power_cap"
    assert shown["TF32 matmul"] == "False" and shown["triton".title()] == "3.5.0"


def test_environment_summary_a_column_per_distinct_environment():
    env = pl.concat([environment_rows(["a"]), environment_rows(["b"], gpu_name="NVIDIA H200")])
    shown = sections.environment_summary(env)
    assert shown.columns == ["field", "environment 1", "environment 2"]
    assert sections.environment_summary(env.clear()).is_empty()


def test_failures_groups_not_ok_rows_with_message():
    training = training_rows()
    oom = training.head(1).with_columns(status=pl.lit("oom"), message=pl.lit("CUDA out of memory"))
    failed = sections.failures({"training": pl.concat([training, oom]), "environment": environment_rows(["a"])},
                               {"sweeps": "file not found: results/sweeps.parquet"})
    assert failed["table"].to_list() == ["sweeps", "training", "training"]
    missing = row(failed, table="sweeps")
    assert missing["status"] == "missing" and "file not found" in missing["message"]
    not_run = row(failed, status="not_run")
    assert not_run["message"] == NOT_RUN_MESSAGE and not_run["rows"] == 2
    assert "backend=cudnn" in not_run["where"] and "dataset" not in not_run["where"]
    assert not_run["which"] == ["dataset=digits", "dataset=synthetic-cifar10"]
    assert row(failed, status="oom")["rows"] == 1


def test_failures_list_failed_downloads_first_with_what_to_do():
    retry = "cifar10: download failed; to retry: fix the source, then rerun with `--forcerun x/download.json`"
    datasets = {"cifar10": {"dataset": "cifar10", "status": "missing", "message": retry},
                "digits": {"dataset": "digits", "status": "ok", "message": None}}
    failed = sections.failures({"training": training_rows()}, {}, datasets)
    assert failed["table"].to_list()[0] == sections.DATASETS
    first = failed.row(0, named=True)
    assert (first["status"], first["message"], first["where"]) == ("missing", retry, "dataset=cifar10")
    assert failed.filter(pl.col("table") == sections.DATASETS).height == 1   # digits was obtained


def test_repeats_count_each_status_apart():
    training = training_rows(not_run_backend=None, repeats=3)
    statuses = {0: "error", 1: "missing", 2: "not_run"}
    failing = (training.filter(pl.col("backend") == "eager")
               .group_by("dataset", "repeat").first()
               .with_columns(status=pl.col("repeat").replace_strict(statuses), epoch=pl.lit(None, pl.Int64)))
    summary = training_summary.training_summary(pl.concat([training.filter(pl.col("backend") != "eager"),
                                                           tables.frame("training", failing)]))
    eager = row(summary, backend="eager", dataset="digits")
    assert [eager[c] for c in study_a.REPEAT_COUNTS] == [0, 1, 1, 1]
    shown = row(study_a.summary_display(summary), backend="eager", dataset="digits")
    assert shown["repeats"] == "0 ok, 1 not_run, 1 missing, 1 failed"


def test_report_without_a_gpu_says_what_it_measured_and_points_to_smoke():
    cpu = environment_rows(["a", "b"]).with_columns(device=pl.lit("cpu"))
    missing = training_rows(backends=(), not_run_backend="eager").with_columns(status=pl.lit("missing"))
    frames = {"training": pl.concat([training_rows(), missing]), "environment": cpu}
    datasets = {"voc2012": {"status": "missing", "message": "download failed"}}
    banner = sections.without_gpu(cpu, frames, datasets)
    assert banner.startswith("No job of this run had a GPU (every job's device: cpu).")
    assert "Measured here (ok): 48 rows (training)." in banner
    assert "Not measured, not_run (the config runs them only on a GPU, require_gpu, or they need one): 2 rows " \
           "(training)." in banner
    assert "Not measured, missing (their datasets voc2012 not obtained): 2 rows (training)." in banner
    assert sections.SMOKE_COMMAND in banner
    study = pl.DataFrame({"run_id": [sweep_summary.STUDY_RUN_ID], "status": ["ok"]})   # no row of this run
    assert "Measured here (ok): nothing." in sections.without_gpu(cpu, {"sweep_kernels": study})
    assert sections.without_gpu(environment_rows(["a"]), frames) is None     # a GPU run says nothing
    assert sections.without_gpu(cpu.clear(), frames) is None


def test_a_wide_table_shows_its_status_first_in_a_scrolling_box():
    df = pl.DataFrame({f"c{i}": [1] for i in range(30)}).with_columns(status=pl.lit("not_run"))
    text = page.table_html(df)
    assert text.startswith('<div class="ac-table-wrap"><table') and "<thead><tr><th>status</th><th>c0</th>" in text
    assert ".ac-table-wrap { overflow-x: auto" in page.CSS


def test_failures_none_when_all_ok_and_null_status_counts():
    ok = training_rows(not_run_backend=None)
    assert sections.failures({"training": ok}, {}).is_empty()
    nulled = ok.head(1).with_columns(status=pl.lit(None, pl.String))
    assert row(sections.failures({"training": nulled}, {}), table="training")["status"] == "(no status)"


def test_failures_display_escapes_and_folds_long_lists():
    failed = sections.failures({"t": training_rows(backends=(), datasets=[f"d<{i}>" for i in range(10)])}, {})
    html = sections.failures_display(failed)["which"][0]
    assert html.startswith("<details><summary>10 rows") and "dataset=d&lt;0&gt;" in html
    assert sections.failures_display(failed.clear()).is_empty()


def test_identity_columns_are_those_before_status():
    assert sections.identity_columns(training_rows()) == [
        "backend", "dataset", "init", "repeat", "seed", "epoch", "phase", "device", "batch_size"]
    assert sections.identity_columns(environment_rows(["a"])) == []


# ------------------------------------------------------------------------------------------- page
def test_load_registered_missing_unregistered_and_unreadable(tmp_path, monkeypatch):
    tables.write("training", training_rows(), tmp_path / "training.parquet")
    pl.DataFrame({"x": [1]}).write_parquet(tmp_path / "stale.parquet")
    monkeypatch.setenv(page.TABLES_ENV, json.dumps({
        "training": str(tmp_path / "training.parquet"), "training_summary": str(tmp_path / "absent.parquet"),
        "training_curve": str(tmp_path / "stale.parquet")}))
    assert page.load("training").height == training_rows().height
    missing = page.load("training_summary")
    assert missing.is_empty() and missing.columns == list(tables.schema("training_summary"))
    assert page.load("training_curve").is_empty()
    assert page.load("sweeps").is_empty()
    reasons = page.absent()
    assert set(reasons) == {"training_summary", "training_curve", "sweeps"}
    assert reasons["training_summary"].startswith("file not found")
    assert reasons["training_curve"].startswith("unreadable") and "missing columns" in reasons["training_curve"]
    assert reasons["sweeps"].startswith("not passed to the report")


def test_registry_rejects_what_is_not_a_json_object(monkeypatch):
    assert page.registry() == {}
    monkeypatch.setenv(page.TABLES_ENV, "[1, 2]")
    with pytest.raises(ValueError, match=page.TABLES_ENV):
        page.registry()
    monkeypatch.setenv(page.TABLES_ENV, "{not json")
    with pytest.raises(ValueError, match=page.TABLES_ENV):
        page.registry()


def test_chart_html_inlines_spec_with_svg_renderer_and_unique_ids():
    chart = study_a.training_figure(training_summary.training_curve(training_rows(datasets=("</script><b>",))))
    first, second = page.chart_html(chart), page.chart_html(chart)
    ids = [re.search(r'id="([^"]+)"', h).group(1) for h in (first, second)]
    assert ids[0] != ids[1]
    assert first.count("</script>") == 1                      # the dataset name cannot end the script early
    assert '"renderer": "svg"' in first and "http" not in first.replace("https://vega.github.io/schema", "")


def test_javascript_is_inline_and_needs_no_network():
    js = page.javascript_html()
    assert js.count("</script>") == 2 and '<script type="module">' in js
    assert "window.vegaEmbed" in js and "acVegaQueue" in js
    assert not re.search(r"<(script|link)[^>]+(src|href)=", js)


def test_the_page_inlines_the_bundle_built_beside_the_run_and_builds_its_own_where_another_vl_convert_built_it(
        tmp_path, monkeypatch):
    """Rule report_bundle writes the charts' JavaScript as the run starts; the page inlines that file's bundle
    without building one (vl-convert's 1-2 s stay out of the report's job). A file another vl-convert built is
    rebuilt here; a file that is no bundle is an error naming the variable and the file."""
    import vl_convert
    monkeypatch.delenv(page.BUNDLE_ENV, raising=False)
    bundle = tmp_path / "report_bundle.json"
    page.write_bundle(bundle)
    built = json.loads(bundle.read_text())
    assert built["bundle"] in page.javascript_html()   # built here: the same bundle
    monkeypatch.setenv(page.BUNDLE_ENV, str(bundle))
    bundle.write_text(json.dumps({**built, "bundle": "/* from the rule */"}))
    monkeypatch.setattr(vl_convert, "javascript_bundle", lambda *a, **k: pytest.fail("built again"))
    assert '<script type="module">/* from the rule */</script>' in page.javascript_html()
    bundle.write_text(json.dumps({**built, "vl_convert": "0.0.1", "bundle": "/* stale */"}))
    monkeypatch.setattr(vl_convert, "javascript_bundle", lambda *a, **k: "/* built here */")
    assert "/* built here */" in page.javascript_html() and "stale" not in page.javascript_html()
    bundle.write_text("{}")
    with pytest.raises(ValueError, match=f"{page.BUNDLE_ENV} names {bundle}"):
        page.javascript_html()
    assert not list(tmp_path.glob(".*tmp*"))   # written whole: no temporary file left beside it


def test_table_html_escapes_formats_and_keeps_raw_columns():
    df = pl.DataFrame({"name": ["<b>x</b>"], "time_ms": [1.23456], "which": ["<br>"]})
    text = page.table_html(df, formats={"time_ms": "{:.2f}"}, caption="c", raw_html=("which",))
    assert "&lt;b&gt;x&lt;/b&gt;" in text and '<td class="num">1.23</td>' in text
    assert "<td><br></td>" in text and "<caption>c</caption>" in text


def test_a_long_message_shared_by_rows_is_one_note_under_the_table():
    why = "not timed in isolation: beyond config key 'study_b.blocks.resnet50_convs.limit'"
    df = pl.DataFrame({"conv": ["c0", "c1", "c2", "c3"], "isolated_message": [None, why, why, "short"],
                       "message": [why, None, None, None]})
    text = page.table_html(df)
    assert text.count("<td>note 1</td>") == 3 and text.count(html.escape(why)) == 1
    assert '<ol class="ac-table-notes"><li value="1">' in text and "<td>short</td>" in text
    alone = page.table_html(df.slice(2, 2))  # a message on one row stays in its cell
    assert "ac-table-notes" not in alone and f"<td>{html.escape(why)}</td>" in alone


def _final(summary: pl.DataFrame, backend: str, low: float, high: float) -> pl.DataFrame:
    """summary with `backend`'s final accuracies over repeats set to [low, high]."""
    pick = pl.col("backend") == backend
    return summary.with_columns(
        final_accuracy_min=pl.when(pick).then(low).otherwise(pl.col("final_accuracy_min")),
        final_accuracy_max=pl.when(pick).then(high).otherwise(pl.col("final_accuracy_max")),
        final_accuracy_mean=pl.when(pick).then((low + high) / 2).otherwise(pl.col("final_accuracy_mean")))


def test_accuracy_finding_reads_the_ranges_over_repeats_and_flips():
    rows = training_rows(backends=("eager", "libtorch", "cudnn"), datasets=("digits",), not_run_backend=None)
    summary = _final(training_summary.training_summary(rows), "eager", 0.70, 0.72)
    same_lags = _final(_final(summary, "libtorch", 0.71, 0.73), "cudnn", 0.50, 0.55)
    text = study_a.accuracy_finding(same_lags)
    assert "PyTorch (their ranges over repeats overlap): holds." in text
    assert "(cuDNN's range below eager's): holds." in text
    apart = _final(_final(summary, "libtorch", 0.80, 0.82), "cudnn", 0.80, 0.85)
    text = study_a.accuracy_finding(apart)
    assert "overlap): does not hold." in text and "below eager's): does not hold." in text
    overlapping = _final(summary, "cudnn", 0.69, 0.71)
    assert "below eager's): no measurable difference at this precision." in study_a.accuracy_finding(overlapping)
    one_repeat = training_summary.training_summary(training_rows(backends=("eager", "libtorch"), datasets=("digits",),
                                                                 repeats=1, not_run_backend=None))
    assert "overlap): no measurable difference at this precision." in study_a.accuracy_finding(one_repeat)
    assert "Not measured" in study_a.accuracy_finding(summary.filter(pl.col("backend") == "eager"))
