"""The sections every report has: what the results were measured on, and which results are missing and why."""
from __future__ import annotations

import html

import polars as pl

from ..study_a.sweep.summary import STUDY_RUN_ID

# Environment columns that identify a configuration; rows that agree on all of them are one environment.
_STATIC = [
    ("device", "device"), ("GPU", "gpu_name"), ("GPU memory (MiB)", "gpu_memory_total_mib"),
    ("driver", "driver_version"), ("CUDA", "cuda_version"), ("cuDNN", "cudnn_version"),
    ("torch", "torch_version"), ("torchvision", "torchvision_version"), ("Triton", "triton_version"),
    ("Python", "python_version"), ("CPU", "cpu_model"), ("CPU count", "cpu_count"),
    ("torch threads", "torch_threads"),
    ("TF32 matmul", "tf32_matmul"), ("TF32 cuDNN", "tf32_cudnn"), ("cudnn.benchmark", "cudnn_benchmark"),
    ("git revision", "git_revision"), ("git dirty", "git_dirty"), ("config hash", "config_hash"),
    ("NVML", "nvml_status"),
]
# GPU state sampled before and after every job: shown as the range over the environment's jobs.
_STATE = [
    ("SM clock (MHz)", "sm_clock_mhz"), ("memory clock (MHz)", "mem_clock_mhz"),
    ("temperature (°C)", "temperature_c"), ("power (W)", "power_w"),
]


def _text(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.0f}" if value == int(value) else f"{value:.1f}"
    return str(value)


def _range(series: pl.Series) -> str:
    values = series.drop_nulls()
    if values.is_empty():
        return "–"
    low, high = values.min(), values.max()
    return _text(low) if low == high else f"{_text(low)}–{_text(high)}"


def _distinct(series: pl.Series) -> str:
    values = sorted({str(v) for v in series.drop_nulls().to_list()})
    return ", ".join(values) if values else "–"


def environment_summary(env: pl.DataFrame) -> pl.DataFrame:
    """One column per distinct environment (usually one), one row per field: versions, numerics, GPU state.

    Rows of `env` are the environment table's (one per measuring job); jobs that agree on every identifying
    field are one environment, and their before/after GPU state is shown as a range over those jobs."""
    if env.is_empty():
        return pl.DataFrame(schema={"field": pl.String})
    static = [column for _, column in _STATIC]
    groups = env.group_by(static, maintain_order=True).agg(pl.all())
    columns = {"field": [label for label, _ in _STATIC]
               + ["jobs", "hosts", "started (UTC)"]
               + [f"{label} before → after" for label, _ in _STATE]
               + ["throttle reasons before", "throttle reasons after"]}
    for i, group in enumerate(groups.iter_rows(named=True)):
        values = [_text(group[column]) for column in static]
        if group["git_revision"]:
            values[static.index("git_revision")] = group["git_revision"][:12]
        started = sorted(s for s in group["started_at"] if s)
        values += [str(len(group["run_id"])), _distinct(pl.Series(group["hostname"])),
                   f"{started[0]} – {started[-1]}" if started else "–"]
        for _, column in _STATE:
            before = _range(pl.Series(group[f"{column}_before"], dtype=pl.Float64))
            after = _range(pl.Series(group[f"{column}_after"], dtype=pl.Float64))
            values.append(f"{before} → {after}")
        values += [_distinct(pl.Series(group["throttle_reasons_before"], dtype=pl.String)),
                   _distinct(pl.Series(group["throttle_reasons_after"], dtype=pl.String))]
        columns["value" if groups.height == 1 else f"environment {i + 1}"] = values
    return pl.DataFrame(columns)


DATASETS = "(datasets)"  # failures()' table name for the datasets themselves: sorts before every table
SMOKE_COMMAND = "snakemake --cores all --configfile config/smoke.yaml"


def status_counts(frames: dict[str, pl.DataFrame]) -> dict[str, dict[str, int]]:
    """{status: {table: rows}} over every table with a status column, the studies' own reference rows aside;
    each status counted as itself."""
    counts: dict[str, dict[str, int]] = {}
    for name, df in sorted(frames.items()):
        if "run_id" in df.columns:
            df = df.filter(pl.col("run_id").fill_null("") != STUDY_RUN_ID)
        if "status" not in df.columns or df.is_empty():
            continue
        for status, n in df["status"].fill_null("(no status)").value_counts().iter_rows():
            counts.setdefault(status, {})[name] = n
    return counts


def without_gpu(env: pl.DataFrame, frames: dict[str, pl.DataFrame], datasets: dict[str, dict] | None = None
                ) -> str | None:
    """For the top of the report: when no job ran on a GPU, what this run measured and what it could not, and
    where a CPU demonstration is; None when a job ran on a GPU or none ran."""
    if env.is_empty() or (env["device"] == "cuda").any():
        return None
    counts = status_counts(frames)
    def rows(status: str) -> str:
        by_table = counts.get(status, {})
        if not by_table:
            return "nothing"
        return f"{sum(by_table.values())} rows ({', '.join(sorted(by_table))})"
    missing = sorted(n for n, m in (datasets or {}).items() if m.get("status") != "ok")
    failed = {s: t for s, t in counts.items() if s not in ("ok", "not_run", "missing")}
    parts = [f"No job of this run had a GPU (every job's device: {', '.join(sorted(set(env['device'])))}).",
             f"Measured here (ok): {rows('ok')}.",
             f"Not measured, not_run (the config runs them only on a GPU, require_gpu, or they need one): "
             f"{rows('not_run')}."]
    if counts.get("missing"):
        parts.append("Not measured, missing (" + (f"their datasets {', '.join(missing)} not obtained" if missing
                                                  else "an input not obtained") + f"): {rows('missing')}.")
    if failed:
        parts.append("Failed: " + ", ".join(f"{sum(t.values())} {s}" for s, t in sorted(failed.items())) + ".")
    parts.append("Missing or failed results, at the end, lists each with why and what to do. To see every "
                 f"experiment measured on a CPU at a small scale: `{SMOKE_COMMAND}`.")
    return " ".join(parts)


def identity_columns(df: pl.DataFrame) -> list[str]:
    """The columns that say which observation a row is: those declared before `status`, run_id aside."""
    if "status" not in df.columns:
        return []
    return [c for c in df.columns[: df.columns.index("status")] if c != "run_id"]


def failures(frames: dict[str, pl.DataFrame], absent: dict[str, str],
             datasets: dict[str, dict] | None = None) -> pl.DataFrame:
    """Every dataset that could not be obtained (a failed download: its message says how to retry), every row
    whose status is not ok, grouped by (table, status, message), and every table that is missing.

    Columns: table, status, message, rows (how many), where (identity values the group's rows share) and which
    (the differing identity values, one entry per row). A dataset's entry has table "(datasets)"."""
    out = [{"table": DATASETS, "status": "missing", "message": manifest.get("message") or "", "rows": None,
            "where": f"dataset={name}", "which": []}
           for name, manifest in sorted((datasets or {}).items()) if manifest.get("status") != "ok"]
    out += [{"table": name, "status": "missing", "message": f"table not available: {reason}", "rows": None,
             "where": "", "which": []} for name, reason in sorted(absent.items())]
    for name, df in sorted(frames.items()):
        if "status" not in df.columns or df.is_empty():
            continue
        bad = df.filter(pl.col("status").fill_null("(no status)") != "ok")
        if bad.is_empty():
            continue
        keys = identity_columns(df)
        bad = bad.with_columns(pl.col("status").fill_null("(no status)"), pl.col("message").fill_null(""))
        for (status, message), group in bad.group_by(["status", "message"], maintain_order=True):
            ids = group.select(keys)
            shared = [c for c in keys if ids[c].n_unique() == 1 and ids[c][0] is not None]
            varying = [c for c in keys if c not in shared and ids[c].null_count() < ids.height]
            which = sorted({", ".join(f"{c}={v}" for c, v in zip(varying, row) if v is not None)
                            for row in ids.select(varying).iter_rows()}) if varying else []
            out.append({"table": name, "status": status, "message": message, "rows": group.height,
                        "where": ", ".join(f"{c}={ids[c][0]}" for c in shared), "which": which})
    schema = {"table": pl.String, "status": pl.String, "message": pl.String, "rows": pl.Int64,
              "where": pl.String, "which": pl.List(pl.String)}
    return pl.DataFrame(out, schema=schema).sort(["table", "status", "message"], nulls_last=True)


def failures_display(failed: pl.DataFrame, inline: int = 8) -> pl.DataFrame:
    """failures() for the page: `which` as HTML, folded into <details> beyond `inline` entries."""
    def which_html(entries: list[str]) -> str:
        items = [html.escape(e) for e in entries]
        if len(items) <= inline:
            return "<br>".join(items)
        return f"<details><summary>{len(items)} rows</summary>{'<br>'.join(items)}</details>"

    if failed.is_empty():
        return failed.with_columns(pl.col("which").list.join(""))
    return failed.with_columns(
        pl.col("which").map_elements(lambda e: which_html(list(e)), return_dtype=pl.String))
