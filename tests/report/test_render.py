"""Rendering a .qmd into one self-contained HTML file: includes, cell options, renderer choice, both renderers."""
from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest

from abstraction_cost.report import page, render
from abstraction_cost.report.page import TABLES_ENV


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def network_refs(page: str) -> list[str]:
    return re.findall(r"<(?:script|link|img|iframe)[^>]+(?:src|href)=[\"']?(?:https?:)?//[^\"'> ]+", page)


# ---------------------------------------------------------------------------------- document text
def test_includes_are_inlined_recursively_relative_to_the_including_file(tmp_path):
    write(tmp_path / "parts" / "_inner.qmd", "inner text\n")
    write(tmp_path / "parts" / "_outer.qmd", "outer start\n{{< include _inner.qmd >}}\nouter end\n")
    doc = write(tmp_path / "doc.qmd", "top\n  {{< include parts/_outer.qmd >}}\nsee `{{< include x >}}` inline\n")
    text = render.inline_includes(doc)
    assert text == "top\nouter start\ninner text\nouter end\nsee `{{< include x >}}` inline\n"


def test_missing_include_names_the_file_and_the_including_file(tmp_path):
    doc = write(tmp_path / "doc.qmd", "{{< include _nowhere.qmd >}}\n")
    with pytest.raises(render.RenderError, match=r"doc\.qmd: included file '_nowhere\.qmd' not found"):
        render.inline_includes(doc)


def test_include_cycle_is_an_error(tmp_path):
    write(tmp_path / "_a.qmd", "{{< include _b.qmd >}}\n")
    write(tmp_path / "_b.qmd", "{{< include _a.qmd >}}\n")
    with pytest.raises(render.RenderError, match="include cycle: _a.qmd -> _b.qmd -> _a.qmd"):
        render.inline_includes(tmp_path / "_a.qmd")


def test_front_matter_and_cell_options():
    meta, body = render.split_front_matter("---\ntitle: T\nexecute:\n  echo: false\n---\n\nbody\n")
    assert meta == {"title": "T", "execute": {"echo": False}} and body == "\nbody\n"
    assert render.split_front_matter("no front matter\n") == ({}, "no front matter\n")
    assert render.cell_options("#| label: a\n#| include: false\nx = 1\n#| not: an option") == {
        "label": "a", "include": False}
    assert render.cell_options("x = 1") == {}


def test_notebook_has_title_markdown_and_code_and_drops_eval_false(tmp_path):
    doc = write(tmp_path / "doc.qmd", "---\ntitle: My report\n---\n\nText.\n\n```{python}\n#| eval: false\n"
                "raise SystemExit\n```\n\n```{python}\n#| label: kept\nx = 1\n```\n")
    nb = render.notebook(doc)
    assert [c.cell_type for c in nb.cells] == ["markdown", "markdown", "code"]
    assert nb.cells[0].source == "# My report" and nb.metadata["title"] == "My report"
    assert nb.cells[2].metadata["quarto_options"] == {"label": "kept"}


def test_choose_renderer():
    assert render.choose("auto", quarto="/opt/quarto/bin/quarto")[0] == "quarto"
    chosen, why = render.choose("auto", quarto="")
    assert chosen == "jupyter" and "no quarto command" in why
    assert render.choose("jupyter", quarto="/opt/quarto/bin/quarto")[0] == "jupyter"
    with pytest.raises(render.RenderError, match="report.renderer is quarto but no quarto command is on PATH"):
        render.choose("quarto", quarto="")
    with pytest.raises(render.RenderError, match="report.renderer is 'latex'"):
        render.choose("latex", quarto="")


# ------------------------------------------------------------------------------------------ jupyter
DOC = """---
title: Render test
execute:
  warning: false
---

Some *markdown*.

{{< include _part.qmd >}}

```{python}
#| include: false
print("hidden output")
```

```{python}
import sys
print("warned", file=sys.stderr)
print("**asis text**")
```
"""
PART = """## From the partial

```{python}
#| output: asis
import os, sys
print("kernel:", sys.executable)
print("tables:", os.environ["ABSTRACTION_COST_TABLES"])
```
"""


def test_jupyter_renders_one_offline_page_with_this_interpreter(tmp_path):
    doc = write(tmp_path / "report" / "doc.qmd", DOC)
    write(tmp_path / "report" / "_part.qmd", PART)
    out = tmp_path / "out" / "doc.html"
    assert render.render(doc, out, {"training": "results/t.parquet"}, renderer="jupyter") == "jupyter"
    page = out.read_text()
    assert "<title>Render test</title>" in page and "From the partial" in page
    assert f"kernel: {sys.executable}" in page                 # the kernel is this interpreter
    assert json.dumps({"training": str(Path("results/t.parquet").resolve())}) in page.replace("&quot;", '"')
    assert "<strong>asis text</strong>" not in page and "**asis text**" in page   # plain output stays text
    assert "hidden output" not in page and "warned" not in page
    assert "print(" not in page and "import sys" not in page   # code hidden
    assert network_refs(page) == []
    assert [p.name for p in out.parent.iterdir()] == ["doc.html"]


def test_jupyter_asis_output_is_markdown(tmp_path):
    doc = write(tmp_path / "doc.qmd", '```{python}\n#| output: asis\nprint("**bold**")\n```\n')
    render.render(doc, tmp_path / "doc.html", {}, renderer="jupyter")
    assert "<strong>bold</strong>" in (tmp_path / "doc.html").read_text()


def test_a_failing_cell_fails_the_render_and_keeps_the_old_output(tmp_path):
    doc = write(tmp_path / "doc.qmd", '```{python}\nraise ValueError("table shape (3, 4) is wrong")\n```\n')
    out = write(tmp_path / "doc.html", "previous report")
    with pytest.raises(render.RenderError, match=r"a cell failed \(jupyter renderer\)[\s\S]*shape \(3, 4\)"):
        render.render(doc, out, {}, renderer="jupyter")
    assert out.read_text() == "previous report" and sorted(p.name for p in tmp_path.iterdir()) == [
        "doc.html", "doc.qmd"]


def test_missing_source_is_named(tmp_path):
    with pytest.raises(render.RenderError, match="nowhere.qmd not found"):
        render.render(tmp_path / "nowhere.qmd", tmp_path / "x.html", {}, renderer="jupyter")


# ------------------------------------------------------------------------------------------- quarto
FAKE_QUARTO = """#!/bin/sh
# Stands in for quarto: records its arguments, working directory and environment as the "rendered" page.
[ "$FAIL" = 1 ] && { echo "ERROR: something in $2 broke" >&2; exit 1; }
while [ "$1" != "--output" ]; do shift; done
{ echo "args ok"; pwd; echo "python=$QUARTO_PYTHON"; echo "tables=$ABSTRACTION_COST_TABLES";
  ls; } > "$2"
"""


@pytest.fixture
def fake_quarto(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    quarto = write(bin_dir / "quarto", FAKE_QUARTO)
    quarto.chmod(quarto.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return quarto


def test_quarto_renders_a_copy_of_the_report_folder(tmp_path, fake_quarto):
    doc = write(tmp_path / "report" / "report.qmd", "text\n")
    write(tmp_path / "report" / "_part.qmd", "part\n")
    out = tmp_path / "results" / "report.html"
    assert render.render(doc, out, {"env": "e.parquet"}, renderer="auto") == "quarto"
    page = out.read_text().splitlines()
    assert page[0] == "args ok" and Path(page[1]).name == "report" and Path(page[1]) != doc.parent
    assert page[2] == f"python={sys.executable}" and '"env": ' in page[3]
    assert "_part.qmd" in page                                  # the partials travel with the document
    assert sorted(p.name for p in doc.parent.iterdir()) == ["_part.qmd", "report.qmd"]   # source untouched


def test_quarto_failure_fails_with_its_message(tmp_path, fake_quarto, monkeypatch):
    monkeypatch.setenv("FAIL", "1")
    doc = write(tmp_path / "report" / "report.qmd", "text\n")
    with pytest.raises(render.RenderError, match=r"failed \(exit 1\):\nERROR: something in report.qmd broke"):
        render.render(doc, tmp_path / "report.html", {}, renderer="quarto")
    assert not (tmp_path / "report.html").exists()


def test_quarto_beside_the_interpreter_is_found(tmp_path, monkeypatch):
    fake_python = write(tmp_path / "venv" / "bin" / "python", "")
    quarto = write(tmp_path / "venv" / "bin" / "quarto", FAKE_QUARTO)
    quarto.chmod(quarto.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(sys, "executable", str(fake_python))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert render.find_quarto() == str(quarto)
    quarto.chmod(stat.S_IRUSR)
    assert render.find_quarto() is None


def test_environment_passes_absolute_table_paths_and_the_package(tmp_path, monkeypatch):
    monkeypatch.delenv(page.BUNDLE_ENV, raising=False)
    env = render.environment({"training": "results/training.parquet"})
    assert json.loads(env[TABLES_ENV]) == {"training": str(Path("results/training.parquet").resolve())}
    assert page.BUNDLE_ENV not in env   # no bundle built beside the run: the page builds its own
    bundled = render.environment({}, bundle="results/report_bundle.json")
    assert bundled[page.BUNDLE_ENV] == str(Path("results/report_bundle.json").resolve())
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(render.SRC)
    assert (render.SRC / "abstraction_cost" / "report" / "render.py").is_file()


def target_install(tmp_path: Path, monkeypatch) -> None:
    """nbconvert as `pip install --target site` leaves it: its templates in site/share/jupyter, beside the package,
    and none on Jupyter's data path (which holds this venv's prefix: emptied here)."""
    import nbconvert
    from nbconvert.exporters import templateexporter

    lab = next(Path(p) / "nbconvert" / "templates" for p in templateexporter.jupyter_path()
               if (Path(p) / "nbconvert" / "templates" / "lab").is_dir())
    site = tmp_path / "site"
    (site / "share" / "jupyter" / "nbconvert").mkdir(parents=True)
    (site / "share" / "jupyter" / "nbconvert" / "templates").symlink_to(lab)
    (site / "nbconvert").symlink_to(Path(nbconvert.__file__).parent)
    monkeypatch.setattr(nbconvert, "__file__", str(site / "nbconvert" / "__init__.py"))
    monkeypatch.setattr(templateexporter, "jupyter_path", lambda *parts: [str(tmp_path / "empty")])
    # the exporter's own copy of that path, taken when nbconvert was imported (where `extends 'lab/...'` resolves)
    data_paths = templateexporter.TemplateExporter.class_traits()["template_data_paths"]
    monkeypatch.setattr(data_paths, "default_value", [str(tmp_path / "empty")])


def test_jupyter_finds_nbconvert_templates_that_an_install_into_a_folder_put_beside_it(tmp_path, monkeypatch):
    """The default run on two H200s lost its report to this: wheels installed with pip --target onto PYTHONPATH."""
    target_install(tmp_path, monkeypatch)
    doc = write(tmp_path / "doc.qmd", '```{python}\n#| output: asis\nprint("**bold**")\n```\n')
    render.render(doc, tmp_path / "doc.html", {}, renderer="jupyter")
    assert "<strong>bold</strong>" in (tmp_path / "doc.html").read_text()


def test_jupyter_without_nbconvert_templates_fails_before_running_cells_naming_jupyter_path(tmp_path, monkeypatch):
    target_install(tmp_path, monkeypatch)
    monkeypatch.setattr(render, "templates_beside_nbconvert", lambda: [])
    ran = tmp_path / "ran"
    doc = write(tmp_path / "doc.qmd", f'```{{python}}\nopen({str(ran)!r}, "w")\n```\n')
    with pytest.raises(render.RenderError, match=r"cannot find nbconvert's templates[\s\S]*'lab'[\s\S]*JUPYTER_PATH"):
        render.render(doc, tmp_path / "doc.html", {}, renderer="jupyter")
    assert not ran.exists() and not (tmp_path / "doc.html").exists()
