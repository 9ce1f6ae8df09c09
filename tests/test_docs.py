"""The docs are kept true: docs/architecture.md's layout names every rule file and subpackage that exists and
nothing else, every link in a repository doc leads to a file inside the repository, README.md stays an entry
point with CI's test command, and every measured run in docs/results/ says what it ran on."""
import re

from tests.fixtures.repository import REPO
from tests.fixtures.repository import repository_files


def layout_block() -> list[str]:
    text = (REPO / "docs/architecture.md").read_text()
    block = re.search(r"## Layout\n```\n(.*?)\n```", text, re.S)
    assert block, "docs/architecture.md has no ## Layout code block"
    return block.group(1).splitlines()


def named_under(lines: list[str], root: str, suffix: str) -> set[str]:
    """The names ending in `suffix` listed under `root` in the layout, nested ones as parent/child (two spaces
    of indent per level)."""
    start = next((i for i, line in enumerate(lines) if line.split()[:1] == [root]), None)
    assert start is not None, f"docs/architecture.md's layout has no line for {root}"
    names, stack = set(), []
    for line in lines[start + 1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0:
            break
        token = line.split()[0]
        if indent % 2 or not token.endswith(suffix) or indent > 2 * (len(stack) + 1):
            continue  # a description's continuation line
        stack = stack[:indent // 2 - 1] + [token.rstrip("/")]
        names.add("/".join(stack))
    return names


def test_architecture_names_every_rule_file_and_no_other():
    named = named_under(layout_block(), "workflow/rules/", ".smk")
    existing = {p.name for p in (REPO / "workflow/rules").glob("*.smk")}
    assert named == existing, (f"docs/architecture.md's layout names rule files that do not exist: "
                               f"{sorted(named - existing)}; and omits: {sorted(existing - named)}")


def test_architecture_names_every_subpackage_and_no_other():
    named = named_under(layout_block(), "src/abstraction_cost/", "/")
    package = REPO / "src/abstraction_cost"
    existing = {str(d.relative_to(package)) for d in package.rglob("*")
                if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py"))}
    assert named == existing, (f"docs/architecture.md's layout names subpackages that do not exist: "
                               f"{sorted(named - existing)}; and omits: {sorted(existing - named)}")


def test_the_layout_parser_reads_nesting_and_skips_descriptions():
    lines = ["src/abstraction_cost/", "  study_a/                what it is", "                          more words/",
             "    sweep/                nested", "  tables/                 x", "  config.py               y",
             "native/                   z"]
    assert named_under(lines, "src/abstraction_cost/", "/") == {"study_a", "study_a/sweep", "tables"}


def test_every_link_in_a_doc_leads_to_a_file_inside_the_repository():
    link = re.compile(r"\]\(([^)\s]+)\)")
    bad = []
    for doc in repository_files({".md"}):
        text = doc.read_text()
        where = doc.relative_to(REPO)
        bad += [f"{where}: {m}" for m in re.findall(r"/work/\S+|\.\./shared/\S+", text)]
        for target in link.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (doc.parent / target.split("#")[0]).resolve()
            if not path.is_relative_to(REPO) or not path.exists():
                bad.append(f"{where}: {target}")
    assert not bad, f"links outside the repository or to nothing: {bad}"


def test_readme_is_an_entry_point_with_ci_test_command():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 100, "README.md is the front door: at most 100 lines"
    ci_command = (REPO / ".ci/run").read_text().strip().splitlines()[-1]
    assert ci_command == "./setup.sh test && .venv/bin/pytest"
    assert ci_command in readme, "README.md's test command is not the one .ci/run runs"
    for doc in ("docs/architecture.md", "config/README.md", "docs/experiments.md", "docs/faults.md",
                "benchmarks/README.md", "docs/results/", "CHANGELOG.md"):
        assert f"]({doc}" in readme, f"README.md does not link {doc}"


def test_every_measured_run_names_its_revision_and_environment_and_is_listed():
    results = REPO / "docs/results"
    listing = (results / "README.md").read_text()
    pages = sorted(p for p in results.glob("*.md") if p.name != "README.md")
    assert pages
    for page in pages:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}-[a-z0-9]+-[a-z0-9-]+\.md", page.name), \
            f"docs/results/{page.name}: not named <yyyy-mm-dd>-<gpu>-<what>.md"
        text = page.read_text()
        for field in ("**Environment:**", "**Code revision:**"):
            assert field in text, f"docs/results/{page.name} does not state its {field.strip('*:').lower()}"
        assert f"]({page.name})" in listing, f"docs/results/README.md does not list {page.name}"


def test_every_fault_in_faults_md_names_tests_that_exist():
    text = (REPO / "docs/faults.md").read_text()
    rows = [line for line in text.splitlines() if re.match(r"\| \d+ \|", line)]
    assert rows, "docs/faults.md has no table of faults"
    defined = set(re.findall(r"^def (test_\w+)", "\n".join(
        p.read_text() for p in (REPO / "tests/faults").glob("test_*.py")), re.M))
    for row in rows:
        named = re.findall(r"`(test_\w+)`", row.split("|")[-2])
        assert named, f"docs/faults.md: fault {row.split('|')[1].strip()} names no test"
        assert set(named) <= defined, f"docs/faults.md names tests that do not exist: {set(named) - defined}"
