"""How the report reaches its tables, and how charts, tables and notes reach the page.

The pipeline passes the report its tables as JSON {table name: parquet path} in the environment variable
ABSTRACTION_COST_TABLES (rule `report`, scripts/render_report.py). A table that is not registered, not written
or unreadable loads as an empty frame with its declared columns, and `absent()` says why, so a partial report
still renders and the "Missing or failed results" section names what is missing.

Charts are altair charts drawn in the browser by vega-embed with the SVG renderer. The vega, vega-lite and
vega-embed JavaScript is inlined once per page (by `setup()`, or by the first `show()`), so the page needs no
network; each chart is a <div class="ac-chart"> and a short script that draws its spec into it.

    from abstraction_cost.report import page
    df = page.load("training_summary")
    page.show(chart) / page.show_table(df, formats={...}) / page.note("...")

The datasets the run read reach it the same way (DATASETS_ENV, {dataset: prepared folder}): `datasets()`; the
charts' JavaScript too, built at the run's start by rule `report_bundle` (BUNDLE_ENV), since vl-convert's 1-2 s
would otherwise fall in the report's job, after every other.
"""
from __future__ import annotations

import hashlib
import html
import itertools
import json
import os
import secrets
from collections import Counter
from pathlib import Path
from typing import Callable, Mapping

import altair as alt
import polars as pl

from .. import tables

TABLES_ENV = "ABSTRACTION_COST_TABLES"
DATASETS_ENV = "ABSTRACTION_COST_DATASETS"  # {dataset: prepared folder}, JSON, of the datasets the run read
BUNDLE_ENV = "ABSTRACTION_COST_VEGA_BUNDLE"  # the charts' JavaScript, built beside the run (write_bundle)

# Every table the page asked for, and why those whose file exists could not be read as their schema.
_requested: set[str] = set()
_unreadable: dict[str, str] = {}
_emitted = False
_ids = itertools.count()
_page_token = secrets.token_hex(3)

CSS = """
.ac-chart { margin: 0.5em 0 1.5em 0; overflow-x: auto; }
/* a table wider than the page scrolls in its own box; its status column comes first (table_html), in view */
.ac-table-wrap { overflow-x: auto; max-width: 100%; }
table.ac-table { border-collapse: collapse; margin: 0.5em 0 1.5em 0; font-size: 0.85em; }
/* !important: the renderers' own table styles are more specific (nbconvert's lab CSS right-aligns cells) */
table.ac-table th, table.ac-table td { border-bottom: 1px solid #ddd; padding: 0.2em 0.6em;
  text-align: left !important; vertical-align: top; }
table.ac-table td.num { text-align: right !important; font-variant-numeric: tabular-nums; }
.ac-table caption { caption-side: top; text-align: left; font-style: italic; padding-bottom: 0.3em; }
ol.ac-table-notes { font-size: 0.85em; margin: -1em 0 1.5em 0; }
.ac-note { color: #8a4b00; background: #fff7e6; border-left: 4px solid #f0a030; padding: 0.4em 0.8em; }
"""

# Run by the inlined bundle once vega-embed is loaded: expose it, then draw the charts queued before it loaded
# (module scripts run after the page is parsed, the charts' classic scripts while it is parsed).
_BUNDLE_SNIPPET = """
window.vegaEmbed = vegaEmbed;
const queued = window.acVegaQueue || [];
window.acVegaQueue = null;
for (const [el, spec, opt] of queued) { window.acDrawChart(el, spec, opt); }
"""

# Defined before any chart script runs; draws now if vega-embed is loaded, else queues for the bundle.
_DRAW_FUNCTION = """
window.acDrawChart = function (el, spec, opt) {
  if (!window.vegaEmbed) { (window.acVegaQueue = window.acVegaQueue || []).push([el, spec, opt]); return; }
  window.vegaEmbed(el, spec, opt).catch(function (err) {
    el.textContent = "chart failed to draw: " + err;
    el.classList.add("ac-chart-failed");
  });
};
"""

EMBED_OPTIONS = {"renderer": "svg", "actions": False}


# ----------------------------------------------------------------------------------------------- tables
def registry() -> dict[str, str]:
    """The tables the pipeline passed to the report: {name: path}; empty when rendered outside the pipeline."""
    raw = os.environ.get(TABLES_ENV)
    if not raw:
        return {}
    try:
        paths = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ValueError(f"environment variable {TABLES_ENV} is not JSON {{table: path}}: {err}") from None
    if not isinstance(paths, dict):
        raise ValueError(f"environment variable {TABLES_ENV} must be a JSON object {{table: path}}")
    return {str(k): str(v) for k, v in paths.items()}


def _empty(name: str) -> pl.DataFrame:
    return pl.DataFrame(schema=tables.SCHEMAS[name]) if name in tables.SCHEMAS else pl.DataFrame()


def load(name: str) -> pl.DataFrame:
    """The table, or an empty frame with its declared columns when it is not there (see absent())."""
    _requested.add(name)
    path = registry().get(name)
    if path is None or not Path(path).is_file():
        return _empty(name)
    try:
        df = tables.read(name, path) if name in tables.SCHEMAS else pl.read_parquet(path)
    except Exception as err:  # a stale or foreign file must not stop the report; it is listed instead
        _unreadable[name] = f"{path}: {type(err).__name__}: {err}"
        return _empty(name)
    _unreadable.pop(name, None)
    return df


def absent(names: list[str] | None = None) -> dict[str, str]:
    """{table: why it is missing} for the tables registered or asked for (or `names`) that cannot be read."""
    paths = registry()
    reasons = {}
    for name in (names if names is not None else sorted(set(paths) | _requested)):
        if name not in paths:
            reasons[name] = "not passed to the report (not registered in TABLES, or rendered outside the pipeline)"
        elif not Path(paths[name]).is_file():
            reasons[name] = f"file not found: {paths[name]}"
        elif name in _unreadable:
            reasons[name] = f"unreadable: {_unreadable[name]}"
    return reasons


def datasets() -> dict[str, dict]:
    """{dataset: its prepared manifest} for the datasets the pipeline passed (data/prepared.py); a folder without a
    readable manifest is a 'missing' manifest saying so."""
    raw = os.environ.get(DATASETS_ENV)
    found = {}
    for name, folder in (json.loads(raw) if raw else {}).items():
        try:
            found[name] = json.loads((Path(folder) / "manifest.json").read_text())
        except (OSError, ValueError) as err:
            found[name] = {"dataset": name, "status": "missing", "message": f"{folder}: no readable manifest: {err}"}
    return found


def load_all() -> dict[str, pl.DataFrame]:
    """Every registered table by name (empty frames for those that cannot be read)."""
    return {name: load(name) for name in sorted(registry())}


# ------------------------------------------------------------------------------------------- rendering
def _vega_lite_version() -> str | None:
    """The bundle's vega-lite version: altair's major.minor when vl-convert ships it, else its newest."""
    import vl_convert

    wanted = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return wanted if wanted in vl_convert.get_vegalite_versions() else None


def _bundle_key() -> dict:
    """What a bundle is built from: vl-convert, the vega-lite version, the snippet it ends with."""
    import vl_convert

    return {"vl_convert": vl_convert.__version__, "vega_lite": _vega_lite_version(),
            "snippet": hashlib.sha256(_BUNDLE_SNIPPET.encode()).hexdigest()[:16]}


def build_bundle() -> dict:
    """The vega / vega-lite / vega-embed JavaScript (about 0.9 MB; vl-convert takes 1-2 s), with _bundle_key."""
    import vl_convert

    key = _bundle_key()
    bundle = vl_convert.javascript_bundle(_BUNDLE_SNIPPET, vl_version=key["vega_lite"])
    if "</script" in bundle.lower():  # would end the inline script early; escaping could break its regexes
        raise RuntimeError(f"vl-convert {vl_convert.__version__}: its JavaScript bundle holds '</script' "
                           "and cannot be inlined")
    return {**key, "bundle": bundle}


def write_bundle(path: str | os.PathLike) -> None:
    """build_bundle() as JSON at path, written whole or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(build_bundle()))
    os.replace(tmp, path)


def _bundle() -> str:
    """The bundle the pipeline built beside the run (BUNDLE_ENV: rule report_bundle, so that the report, the last
    job of every run, does not build it) where the same vl-convert and snippet built it; else built here."""
    path = os.environ.get(BUNDLE_ENV)
    if path:
        key = _bundle_key()
        try:
            built = json.loads(Path(path).read_text())
            if {k: built[k] for k in key} == key:
                return built["bundle"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ValueError(f"environment variable {BUNDLE_ENV} names {path}, which is no bundle that "
                             f"page.write_bundle wrote: {type(err).__name__}: {err}") from None
    return build_bundle()["bundle"]


def javascript_html() -> str:
    """The vega / vega-lite / vega-embed bundle as inline scripts: once per page."""
    return (f"<style>{CSS}</style>\n<script>{_DRAW_FUNCTION}</script>\n"
            f"<script type=\"module\">{_bundle()}</script>")


def _json_in_script(value) -> str:
    # "</script" or "<!--" inside an inline script would end or derail it; "<" only occurs in JSON strings,
    # where "\\u003c" is the same character.
    return json.dumps(value).replace("<", "\\u003c")


def ticks_at(values: pl.Series) -> alt.Axis:
    """An integer axis (log scales above all) ticked at the measured values, e.g. a grid's powers of two, not at
    round numbers whose labels run into each other."""
    return alt.Axis(values=sorted(values.drop_nulls().unique().to_list()), format="d")


def row_labels() -> alt.Header:
    """Facet row labels that read across, left of their row: long ones ("gpu · batch 1 · fp32 · contiguous"),
    rotated as Vega-Lite draws them by default, run into the next row's."""
    return alt.Header(labelAngle=0, labelAlign="right", labelOrient="left", labelLimit=240)


def chart_html(chart: alt.TopLevelMixin) -> str:
    """One chart: its container and the script that draws its spec (data inline) with the SVG renderer."""
    spec = chart.to_dict()
    element_id = f"ac-chart-{_page_token}-{next(_ids)}"
    return (f'<div class="ac-chart" id="{element_id}"></div>\n<script>window.acDrawChart('
            f'document.getElementById("{element_id}"), {_json_in_script(spec)}, '
            f'{json.dumps(EMBED_OPTIONS)});</script>')


def _display_html(text: str) -> None:
    from IPython.display import HTML, display

    display(HTML(text))


def setup() -> None:
    """Put the page's styles and the charts' JavaScript on the page (once; later calls do nothing)."""
    global _emitted
    if not _emitted:
        _display_html(javascript_html())
        _emitted = True


def show(chart: alt.TopLevelMixin | None, empty_message: str = "No data to draw.") -> None:
    """Draw a chart, or say why there is none (chart is None)."""
    if chart is None:
        note(empty_message)
        return
    setup()
    _display_html(chart_html(chart))


def note(text: str) -> None:
    """A visible remark on the page: why a figure or table is empty, or what a result means."""
    setup()
    _display_html(f'<p class="ac-note">{html.escape(text)}</p>')


def _cell(value, fmt: str | Callable | None) -> tuple[str, bool]:
    if value is None:
        return "", False
    if callable(fmt):
        return html.escape(str(fmt(value))), isinstance(value, (int, float))
    if fmt is not None:
        return html.escape(fmt.format(value)), isinstance(value, (int, float))
    if isinstance(value, float):
        return f"{value:.4g}", True
    return html.escape(str(value)), isinstance(value, int) and not isinstance(value, bool)


NOTE_CHARS = 40  # a message at least this long, on two rows or more, is written once under its table


def _message_column(column: str) -> bool:
    return column == "message" or column.endswith("_message")


def shared_messages(df: pl.DataFrame) -> dict[str, int]:
    """Long messages that several rows share (why rows were not run, how a source measured), numbered in order of
    first appearance: such a row says "note N" and the table's notes say it once, instead of a narrow column
    repeating a paragraph on every row."""
    counts = Counter(value for column in df.columns if _message_column(column) for value in df[column]
                     if isinstance(value, str) and len(value) >= NOTE_CHARS)
    return {message: i for i, message in enumerate((m for m, n in counts.items() if n >= 2), start=1)}


def table_html(df: pl.DataFrame, formats: Mapping[str, str | Callable] | None = None,
               caption: str | None = None, raw_html: tuple[str, ...] = ()) -> str:
    """An HTML table of df; formats maps a column to a format string ("{:.2f}") or a function.

    Columns named in raw_html hold HTML already (escaped by whoever built it) and are inserted as they are. A long
    message that several rows share is a numbered note under the table (shared_messages). A `status` column is
    shown first, and a table wider than the page scrolls in its own box."""
    formats = formats or {}
    if "status" in df.columns:  # first: a wide table's status must not be the column scrolled out of view
        df = df.select("status", pl.exclude("status"))
    notes = shared_messages(df)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    rows = []
    for row in df.iter_rows(named=True):
        cells = []
        for column, value in row.items():
            if column in raw_html:
                cells.append(f"<td>{'' if value is None else value}</td>")
                continue
            if _message_column(column) and value in notes:
                cells.append(f"<td>note {notes[value]}</td>")
                continue
            text, numeric = _cell(value, formats.get(column))
            cells.append(f'<td class="num">{text}</td>' if numeric else f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    caption_html = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    notes_html = "".join(f'<li value="{i}">{html.escape(message)}</li>' for message, i in notes.items())
    return (f'<div class="ac-table-wrap"><table class="ac-table">{caption_html}<thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>'
            + (f'<ol class="ac-table-notes">{notes_html}</ol>' if notes else ""))


def show_table(df: pl.DataFrame, formats: Mapping[str, str | Callable] | None = None,
               caption: str | None = None, empty_message: str = "No rows.",
               raw_html: tuple[str, ...] = ()) -> None:
    """Show df as an HTML table, or say why there is none (no rows)."""
    if df.is_empty():
        note(empty_message)
        return
    setup()
    _display_html(table_html(df, formats, caption, raw_html))
