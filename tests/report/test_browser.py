"""The rendered report in a real browser: every chart drawn as SVG with marks, nothing fetched from the network.

Builds its own small tables (training rows with a not_run row, environment rows, the derived Study A tables),
renders report/report.qmd through the Jupyter renderer and opens the page in headless Chromium, with every
network request sent to a dead proxy. Needs Debian's chromium (`apt-get install -y chromium`)."""
from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from abstraction_cost import tables
from abstraction_cost.report import render
from abstraction_cost.study_a.training import summary as training_summary
from tests.fixtures.report_rows import (NOT_RUN_MESSAGE, derived_report_tables, environment_rows, report_run_ids,
                                        training_rows)
from tests.fixtures.repository import REPO

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")


class Charts(HTMLParser):
    """Per chart container (div.ac-chart): whether it holds an <svg>, and how many drawn mark shapes."""

    def __init__(self):
        super().__init__()
        self.stack: list[tuple[str, str]] = []   # (tag, class) of the open elements
        self.charts: dict[str, dict] = {}
        self.failed: list[str] = []

    def _chart(self) -> dict | None:
        for tag, classes in reversed(self.stack):
            if tag == "div" and "ac-chart" in classes.split():
                return self.charts[classes]
        return None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = attrs.get("class") or ""
        if tag == "div" and "ac-chart" in classes.split():
            classes = f"{classes} #{attrs.get('id')}"
            self.charts[classes] = {"svg": 0, "marks": 0}
            if "ac-chart-failed" in classes:
                self.failed.append(attrs.get("id"))
        chart = self._chart()
        if chart is not None:
            chart["svg"] += tag == "svg"
            in_mark = any(t == "g" and "role-mark" in c.split() for t, c in self.stack)
            drawn = tag == "path" and (attrs.get("d") or "").strip() not in ("", "M0,0")
            chart["marks"] += in_mark and drawn
        if tag not in VOID:
            self.stack.append((tag, classes))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return


def network_refs(page: str) -> list[str]:
    return re.findall(r"<(?:script|link|img|iframe)[^>]+(?:src|href)=[\"']?(?:https?:)?//[^\"'> ]+", page)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("report")
    training = training_rows(inits=("kaiming-normal-fan-out", "zero-gamma"))
    paths = {name: out / f"{name}.parquet" for name in ("training", "training_curve", "training_summary",
                                                        "environment")}
    tables.write("training", training, paths["training"])
    tables.write("training_curve", training_summary.training_curve(training), paths["training_curve"])
    tables.write("training_summary", training_summary.training_summary(training), paths["training_summary"])
    derived = derived_report_tables(out)   # the sweep, the backend comparison and the tables derived from them
    paths.update(derived)
    tables.write("environment", environment_rows(sorted(set(training["run_id"]) | report_run_ids(derived))),
                 paths["environment"])
    paths["sweeps"] = out / "not-written.parquet"   # registered but never written: listed as missing
    html = out / "report.html"
    render.render(REPO / "report" / "report.qmd", html, paths, renderer="jupyter")
    return html.read_text()


@pytest.fixture(scope="module")
def dom(rendered, tmp_path_factory) -> str:
    work = tmp_path_factory.mktemp("browser")
    page = work / "report.html"
    page.write_text(rendered)
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run", f"--user-data-dir={work / 'profile'}",
               # any request the page made would go to a closed port and fail, leaving its chart undrawn
               "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
               "--virtual-time-budget=30000", "--dump-dom", page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_every_chart_is_drawn_as_svg_with_marks(dom):
    charts = Charts()
    charts.feed(dom)
    assert charts.charts, "the page has no chart container"
    assert charts.failed == []
    for name, seen in charts.charts.items():
        assert seen["svg"] >= 1, f"{name}: no <svg> drawn"
        assert seen["marks"] >= 1, f"{name}: an <svg> without drawn marks"


def test_page_needs_no_network_and_inlines_vega_once(rendered):
    assert network_refs(rendered) == []
    assert rendered.count('<script type="module">') == 1      # the vega bundle, once for every chart


def test_page_says_what_is_missing_and_why(dom):
    failures = dom[dom.index('id="failures"'):]
    assert "not_run" in failures and NOT_RUN_MESSAGE in failures and "backend=cudnn" in failures
    assert "sweeps" in failures and "file not found" in failures
    assert "NVIDIA H100 80GB HBM3" in dom                   # the environment table
    assert "0.705 [0.700–0.710]" in dom                     # the training summary
    assert "dramatically underperformed" in dom             # the study's finding beside the figure
