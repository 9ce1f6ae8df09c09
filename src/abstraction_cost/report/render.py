"""Render a Quarto document (report/report.qmd) into ONE self-contained HTML file, through Quarto or Jupyter.

- quarto:  `quarto render <qmd> --to html -M embed-resources:true`, run on a copy of the document's folder
           (concurrent renders and Quarto's side files never touch the source tree), Python cells executed by
           this interpreter (QUARTO_PYTHON).
- jupyter: the same .qmd with its `{{< include file >}}` lines inlined, read by jupytext (its R Markdown reader
           takes ```{python} cells and `#|` options), executed by nbclient on a kernel of this interpreter,
           and converted by nbconvert to HTML without code, prompts or any script/link from the network.
- auto:    quarto when the `quarto` command is on PATH or beside this interpreter, else jupyter.

Both write the output atomically (temporary file, then rename) and raise RenderError with the renderer's
message when it fails. The tables reach the document as JSON in the environment (report.page.TABLES_ENV).
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Mapping

import yaml

from .page import BUNDLE_ENV, DATASETS_ENV, TABLES_ENV

log = logging.getLogger(__name__)

RENDERERS = ("auto", "quarto", "jupyter")
SRC = Path(__file__).resolve().parents[2]

# A line holding only an include shortcode, as Quarto writes it: {{< include _part.qmd >}}
INCLUDE = re.compile(r"^[ \t]*\{\{<\s*include\s+(\S+?)\s*>\}\}[ \t]*$", re.MULTILINE)
FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)---[ \t]*(?:\n|\Z)", re.DOTALL)

# nbconvert's lab template, less everything it would fetch from the network (require.js, MathJax, mermaid,
# widget renderer): the report's only scripts are its own, inlined by report.page.
OFFLINE_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
"""


class RenderError(RuntimeError):
    """The report could not be rendered; the message says which file or renderer failed and how."""


def find_quarto() -> str | None:
    """The quarto command: on PATH, or beside this interpreter (pip's quarto-cli in a venv not activated)."""
    beside = Path(sys.executable).parent / "quarto"
    return shutil.which("quarto") or (str(beside) if os.access(beside, os.X_OK) else None)


def choose(renderer: str, quarto: str | None = None) -> tuple[str, str]:
    """(renderer to run, why) for config key report.renderer; quarto: the quarto command ("" = none; None =
    find_quarto())."""
    quarto = quarto if quarto is not None else find_quarto()
    if renderer == "auto":
        if quarto:
            return "quarto", f"report.renderer is auto and the quarto command is at {quarto}"
        return "jupyter", "report.renderer is auto and no quarto command is on PATH or beside this Python"
    if renderer == "quarto":
        if not quarto:
            raise RenderError("report.renderer is quarto but no quarto command is on PATH or beside this Python: "
                              "install Quarto (https://quarto.org/docs/get-started/) or set report.renderer to "
                              "auto or jupyter")
        return "quarto", f"report.renderer is quarto (at {quarto})"
    if renderer == "jupyter":
        return "jupyter", "report.renderer is jupyter"
    raise RenderError(f"report.renderer is {renderer!r}; allowed: {list(RENDERERS)}")


# --------------------------------------------------------------------------------------- document text
def inline_includes(path: str | os.PathLike, _stack: tuple[Path, ...] = ()) -> str:
    """The document's text with every include line replaced by the included file's text, recursively.

    Included paths are relative to the including file, as in Quarto."""
    path = Path(path).resolve()
    if path in _stack:
        cycle = " -> ".join(p.name for p in (*_stack, path))
        raise RenderError(f"include cycle: {cycle}")
    try:
        text = path.read_text()
    except OSError as err:
        including = f"{_stack[-1]}: " if _stack else ""
        raise RenderError(f"{including}cannot read {path}: {err.strerror}") from None

    def replace(match: re.Match) -> str:
        target = path.parent / match.group(1)
        if not target.is_file():
            raise RenderError(f"{path}: included file {match.group(1)!r} not found (looked for {target})")
        return inline_includes(target, (*_stack, path)).rstrip("\n")

    return INCLUDE.sub(replace, text)


def split_front_matter(text: str) -> tuple[dict, str]:
    """(YAML front matter as a dict, the rest of the document)."""
    match = FRONT_MATTER.match(text)
    if not match:
        return {}, text
    meta = yaml.safe_load(match.group(1)) or {}
    if not isinstance(meta, dict):
        raise RenderError("the document's front matter is not a YAML mapping")
    return meta, text[match.end():]


def cell_options(source: str) -> dict:
    """A code cell's Quarto options: the `#| key: value` lines at its top."""
    lines = []
    for line in source.splitlines():
        if not line.startswith("#|"):
            break
        lines.append(line[2:].strip())
    if not lines:
        return {}
    try:
        options = yaml.safe_load("\n".join(lines)) or {}
    except yaml.YAMLError as err:
        raise RenderError(f"cell options {lines!r} are not YAML: {err}") from None
    return options if isinstance(options, dict) else {}


def notebook(qmd: str | os.PathLike):
    """The .qmd (includes inlined) as a notebook: a title cell, its markdown and its Python cells."""
    import jupytext
    import nbformat

    meta, body = split_front_matter(inline_includes(qmd))
    nb = jupytext.reads(body, fmt="Rmd")
    cells = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            options = cell_options(cell.source)
            if options.get("eval") is False:
                continue
            cell.metadata["quarto_options"] = options
        cells.append(cell)
    title = meta.get("title")
    if title:
        heading = f"# {title}" + (f"\n\n*{meta['subtitle']}*" if meta.get("subtitle") else "")
        cells.insert(0, nbformat.v4.new_markdown_cell(heading))
        nb.metadata["title"] = str(title)
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["quarto_execute"] = meta.get("execute") or {}
    return nb


def _apply_output_options(nb) -> None:
    """Honour Quarto's include/output/warning options on the executed notebook's outputs."""
    show_warnings = nb.metadata.get("quarto_execute", {}).get("warning", True) is not False
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        options = cell.metadata.pop("quarto_options", {})
        if options.get("include") is False or options.get("output") is False:
            cell.outputs = []
            continue
        outputs = []
        for output in cell.outputs:
            if output.output_type == "stream" and output.name == "stderr" and \
                    not options.get("warning", show_warnings):
                log.info("cell output on stderr (not shown, execute.warning is false):\n%s", output.text.rstrip())
                continue
            if output.output_type == "stream" and output.name == "stdout" and options.get("output") == "asis":
                import nbformat
                output = nbformat.v4.new_output("display_data", data={"text/markdown": output.text})
            outputs.append(output)
        cell.outputs = outputs


# --------------------------------------------------------------------------------------------- renderers
def _this_interpreter_kernel():
    """A kernel manager whose python3 kernel is this interpreter, whatever kernel specs are installed."""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    class ThisInterpreter(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                              display_name=f"Python ({sys.executable})", language="python",
                              resource_dir=str(Path(__file__).parent))

    return KernelManager(kernel_name="python3", kernel_spec_manager=ThisInterpreter())


def _write_atomic(text: str, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, out)


def templates_beside_nbconvert() -> list[str]:
    """nbconvert's own templates (`lab`, which the offline template extends) where an install into a folder put
    them: `pip install --target DIR` (a cluster's shared folder on PYTHONPATH) writes them to DIR/share/jupyter,
    beside the packages, where Jupyter's data path does not look (it has sys.prefix's and the user's). The exporter
    needs the folder twice: as a base dir (where `lab`'s conf.json and static files are found) and as a loader path
    (where `extends 'lab/index.html.j2'` resolves)."""
    import nbconvert

    beside = Path(nbconvert.__file__).absolute().parents[1] / "share" / "jupyter" / "nbconvert" / "templates"
    return [str(beside)] if beside.is_dir() else []


def render_jupyter(qmd: Path, out: Path, env: Mapping[str, str], timeout_s: int) -> None:
    import jinja2
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError
    from nbconvert import HTMLExporter

    # built and tried on an empty notebook first: a missing template fails here, not after the minute of cells
    beside = templates_beside_nbconvert()
    try:
        exporter = HTMLExporter(extra_loaders=[jinja2.DictLoader({"offline.html.j2": OFFLINE_TEMPLATE})],
                                extra_template_basedirs=beside, extra_template_paths=beside,
                                template_file="offline.html.j2",
                                exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
        exporter.from_notebook_node(nbformat.v4.new_notebook())
    except (ValueError, jinja2.TemplateNotFound) as err:   # nbconvert's data files are not where anyone looks
        raise RenderError(f"the jupyter renderer cannot find nbconvert's templates ({err!r}); reinstall nbconvert, "
                          f"or set JUPYTER_PATH to the share/jupyter folder its install wrote") from None
    nb = notebook(qmd)
    client = NotebookClient(nb, km=_this_interpreter_kernel(), timeout=timeout_s,
                            resources={"metadata": {"path": str(qmd.parent)}})
    try:
        client.execute(env=dict(env))
    except (CellExecutionError, CellTimeoutError) as err:
        raise RenderError(f"{qmd}: a cell failed (jupyter renderer):\n{err}") from None
    _apply_output_options(nb)
    page, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": nb.metadata.get("title", qmd.stem)}})
    _write_atomic(page, out)


def render_quarto(qmd: Path, out: Path, env: Mapping[str, str], quarto: str, timeout_s: int) -> None:
    with tempfile.TemporaryDirectory(prefix="report-") as tmp:
        work = Path(tmp) / qmd.parent.name
        shutil.copytree(qmd.parent, work, ignore=shutil.ignore_patterns("*_files", ".quarto", "*.html"))
        command = [quarto, "render", qmd.name, "--to", "html", "-M", "embed-resources:true",
                   "--output", "rendered.html"]
        log.info("running %s in a copy of %s", " ".join(command), qmd.parent)
        try:
            done = subprocess.run(command, cwd=work, env=dict(env), capture_output=True, text=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise RenderError(f"quarto render {qmd} did not finish within {timeout_s} s") from None
        output = (done.stdout + done.stderr).strip()
        if output:
            log.info("quarto output:\n%s", output)
        rendered = work / "rendered.html"
        if done.returncode != 0 or not rendered.is_file():
            raise RenderError(f"quarto render {qmd} failed (exit {done.returncode}):\n{output[-4000:]}")
        _write_atomic(rendered.read_text(), out)


def environment(tables: Mapping[str, str | os.PathLike],
                datasets: Mapping[str, str | os.PathLike] | None = None,
                bundle: str | os.PathLike | None = None) -> dict[str, str]:
    """This process's environment plus the table registry, the prepared datasets' folders, the charts' JavaScript
    where it was built beside the run (page.write_bundle), the package on PYTHONPATH and Quarto's Python."""
    env = dict(os.environ)
    env[TABLES_ENV] = json.dumps({name: str(Path(p).resolve()) for name, p in tables.items()})
    env[DATASETS_ENV] = json.dumps({name: str(Path(p).resolve()) for name, p in (datasets or {}).items()})
    if bundle is not None:
        env[BUNDLE_ENV] = str(Path(bundle).resolve())
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    env["QUARTO_PYTHON"] = sys.executable
    return env


def render(qmd: str | os.PathLike, out: str | os.PathLike, tables: Mapping[str, str | os.PathLike],
           renderer: str = "auto", timeout_s: int = 1800,
           datasets: Mapping[str, str | os.PathLike] | None = None, bundle: str | os.PathLike | None = None) -> str:
    """Render qmd to the self-contained HTML file out; returns the renderer that ran. datasets: {name: prepared
    folder} of the datasets the run used (a failed download is listed with how to retry); bundle: the charts'
    JavaScript built beside the run (page.write_bundle; else the page builds it)."""
    qmd, out = Path(qmd).resolve(), Path(out).resolve()
    if not qmd.is_file():
        raise RenderError(f"report source {qmd} not found")
    quarto = find_quarto()
    chosen, why = choose(renderer, quarto or "")
    log.info("rendering %s with the %s renderer: %s", qmd, chosen, why)
    env = environment(tables, datasets, bundle)
    if chosen == "quarto":
        render_quarto(qmd, out, env, quarto, timeout_s)
    else:
        render_jupyter(qmd, out, env, timeout_s)
    log.info("wrote %s (%.1f MB)", out, out.stat().st_size / 1e6)
    return chosen
