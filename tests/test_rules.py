"""The rule layer as a whole: every rules file reads alone beside common.smk, `snakemake --lint` is clean, every
shipped config's DAG resolves (a dry run), without importing torch (nor do the table scripts), and
docs/architecture.md names every rules file."""
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.fixtures.no_torch import MESSAGE, env_without_torch

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "workflow" / "rules"
SHARED = {"common.smk", "gpu_slots.smk"}  # common.smk includes gpu_slots.smk (the timing rules' resources)
CONFIGS = sorted((REPO / "config").glob("*.yaml"))

_DEFINED = re.compile(r"^(?:def\s+(\w+)|(\w+)\s*=[^=]|for\s+(\w+)(?:\s*,\s*(\w+))?\s+in\b)")
_IMPORTED = re.compile(r"^(?:from\s+\S+\s+)?import\s+(.+)$")


def defined_names(text: str) -> set[str]:
    """The module-level names a rules file binds: assignments, functions, loop variables and imports."""
    names = set()
    for line in text.splitlines():
        if m := _DEFINED.match(line):
            names.update(n for n in m.groups() if n)
        elif m := _IMPORTED.match(line):
            for part in m.group(1).strip("()").split(","):
                names.add(part.split(" as ")[-1].strip().split(".")[0])
    return names - {""}


def code_of(text: str) -> str:
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def snakemake(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--cores", "2", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def test_a_rules_file_uses_no_name_that_another_rules_file_defines():
    files = {p.name: p.read_text() for p in sorted(RULES.glob("*.smk"))}
    own = {name: defined_names(text) for name, text in files.items() if name not in SHARED}
    assert own, "no rules files found"
    leaks = []
    for user, text in files.items():
        if user in SHARED:
            continue
        code = code_of(text)
        for owner, names in own.items():
            if owner == user:
                continue
            for name in sorted(names - own[user]):
                if re.search(rf"(?<![\w.]){re.escape(name)}\b", code):
                    leaks.append(f"{user} uses {name}, defined in {owner}: move it to common.smk")
    assert not leaks, "\n".join(leaks)


def test_the_name_check_sees_a_name_borrowed_from_another_rules_file():
    assert {"SWEEP_GRID"} <= defined_names((RULES / "study_a_sweep.smk").read_text())
    assert {"MODE_PATTERN", "_COMPILE_MODES"} <= defined_names((RULES / "study_b_blocks.smk").read_text())
    assert "TRAINING" in defined_names("TRAINING = config['study_a']['training']\n")
    assert "helper" in defined_names("def helper(w):\n    return 1\n")


def test_shared_rules_files_define_no_rules():
    for name in SHARED:
        assert not re.search(r"^\s*(rule|checkpoint)\s+\w+\s*:", (RULES / name).read_text(), re.M), name


def test_snakemake_lint_is_clean(tmp_path):
    run = snakemake("--lint", "--configfile", str(REPO / "config" / "smoke.yaml"), cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout + run.stderr
    assert "Congratulations, your workflow is in a good condition!" in out, out[-5000:]


def test_every_shipped_config_resolves_its_dag_in_a_dry_run(tmp_path):
    assert {c.stem for c in CONFIGS} >= {"config", "smoke", "gpu-smoke", "paper"}

    def dry_run(config):
        workdir = tmp_path / config.stem
        workdir.mkdir()
        return config, snakemake("-n", "--configfile", str(config), "-d", str(workdir), cwd=workdir)

    with ThreadPoolExecutor(max_workers=len(CONFIGS)) as pool:
        runs = list(pool.map(dry_run, CONFIGS))
    for config, run in runs:
        assert run.returncode == 0, f"{config.name}: {run.stderr[-3000:]}"
        assert "This was a dry-run" in run.stdout + run.stderr, f"{config.name}: {run.stdout[-2000:]}"
        assert re.search(r"^report\s+1$", run.stdout, re.M), f"{config.name}: the report is not in its DAG"


def test_the_dag_is_built_without_importing_torch(tmp_path):
    """Importing torch and torchvision took 5.8 s of a dry run's 13.5 s, at every Snakemake start (the tests start
    it a few hundred times): with a torch and torchvision that raise on import, the smoke config's dry run passes."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    run = snakemake("-n", "--configfile", str(REPO / "config" / "smoke.yaml"), "-d", str(workdir), cwd=workdir,
                    env=env_without_torch(tmp_path))
    out = run.stdout + run.stderr
    assert run.returncode == 0 and MESSAGE not in out, out[-3000:]
    assert "This was a dry-run" in out and re.search(r"^report\s+1$", run.stdout, re.M), out[-2000:]


# The scripts that only read and write tables or the report: none imports torch (3-5 s of a 2-core CI machine's CPU
# per job)
TABLE_SCRIPTS = ("compare_backends", "concat_environment", "concat_sweep_kernels", "concat_table", "derived_tables",
                 "render_report", "report_bundle", "study_b_block_speedups", "summarise_training", "sweep_h2d",
                 "sweep_speedups", "vision_summaries")
_IMPORTS_OF = """
import ast, pathlib, sys
for path in sys.argv[1:]:
    tree = ast.parse(pathlib.Path(path).read_text())
    imports = ast.Module([n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))], type_ignores=[])
    try:
        exec(compile(imports, path, "exec"), {})
    except ImportError as err:
        print(f"{path}: {err}")
"""


def test_the_table_scripts_import_no_torch(tmp_path):
    """Each table script's imports (all of them at its top) run with a torch and torchvision that raise on import."""
    scripts = [str(REPO / "scripts" / f"{name}.py") for name in TABLE_SCRIPTS]
    run = subprocess.run([sys.executable, "-c", _IMPORTS_OF, *scripts], capture_output=True, text=True,
                         env=env_without_torch(tmp_path))
    assert run.returncode == 0 and run.stdout == "", run.stdout + run.stderr[-3000:]


def test_architecture_names_every_rules_file_and_only_files_that_exist():
    text = (REPO / "docs" / "architecture.md").read_text()
    existing = {p.name for p in RULES.glob("*.smk")}
    named = set(re.findall(r"\b(\w+\.smk)\b", text))
    assert existing - named == set(), f"docs/architecture.md does not name {sorted(existing - named)}"
    assert named - existing == set(), f"docs/architecture.md names missing files {sorted(named - existing)}"
