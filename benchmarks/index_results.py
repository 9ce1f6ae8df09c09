"""Write benchmarks/results/INDEX.md from the result files themselves; `--check` fails where it is stale.

Every result is `<yyyy-mm-dd>_<gpu>_<benchmark>[_<variant>].json` (a benchmark may write a `.md` table beside
its `.json`, under the same stem). `<benchmark>` is one of this folder's scripts or a test that writes results
(PRODUCERS); `<gpu>` is the card's short name (`h100`) or `cpu`. Where a file's contents name the device or the
run's date, the name must agree with them, so a name cannot claim a run the file does not hold.

    python benchmarks/index_results.py            # rewrite benchmarks/results/INDEX.md
    python benchmarks/index_results.py --check    # exit 1, naming the fault, where a name or the index is wrong
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
INDEX = "INDEX.md"
# benchmarks that are not a script of this folder, and what writes their results
OTHER_PRODUCERS = {"cudnn_parity": "tests/study_a/test_cudnn_parity.py with AC_PARITY_REPORT"}
NAME = re.compile(r"^(?P<date>\d{4}-\d{2}-\d{2})_(?P<gpu>[a-z0-9]+)_(?P<rest>[a-z0-9_]+)\.(?P<ext>json|md)$")


def producers() -> dict[str, str]:
    """Each benchmark name a result may carry, and the script or test that writes it."""
    scripts = {p.stem: f"benchmarks/{p.name}" for p in HERE.glob("*.py") if p.stem != Path(__file__).stem}
    return {**scripts, **OTHER_PRODUCERS}


def parse_name(name: str, known: dict[str, str]) -> dict:
    """date, gpu, benchmark, variant and extension of a result file's name; ValueError naming the file."""
    m = NAME.match(name)
    if not m:
        raise ValueError(f"benchmarks/results/{name}: not named <yyyy-mm-dd>_<gpu>_<benchmark>[_<variant>].json")
    rest = m["rest"]
    # the longest benchmark name that the rest starts with: benchmark names themselves contain '_'
    matches = [b for b in known if rest == b or rest.startswith(b + "_")]
    if not matches:
        raise ValueError(f"benchmarks/results/{name}: {rest!r} starts with no benchmark of {sorted(known)}")
    benchmark = max(matches, key=len)
    return {"date": m["date"], "gpu": m["gpu"], "benchmark": benchmark,
            "variant": rest[len(benchmark) + 1:], "ext": m["ext"]}


def gpu_short_name(device: str) -> str | None:
    """`h100` for 'NVIDIA H100 80GB HBM3', `cpu` for 'cpu'; None where the text names no card ('cuda:0')."""
    if device.lower() == "cpu":
        return "cpu"
    m = re.search(r"\b([A-Z]+\d+[A-Z]?)\b", device.replace("NVIDIA", ""))
    return m.group(1).lower() if m else None


def recorded(data: dict) -> dict:
    """What a result file says about its own run: device, torch, config, date, and how many rows or jobs."""
    meta = data.get("meta", {}) if isinstance(data.get("meta"), dict) else {}
    device = data.get("gpu") or data.get("device") or meta.get("device")
    run = data.get("run")
    config = data.get("config")
    config = " + ".join(config) if isinstance(config, list) else config   # a config and its overlays
    out = {"device": device, "torch": data.get("torch") or meta.get("torch"), "config": config,
           "date": run[:10] if isinstance(run, str) and re.match(r"\d{4}-\d{2}-\d{2}", run) else None}
    for key in ("rows", "jobs"):
        if isinstance(data.get(key), list):
            out["size"] = f"{key}: {len(data[key])}"
    if "size" not in out:
        out["size"] = f"entries: {len(data)}"
    return out


def entries(results: Path = RESULTS) -> list[dict]:
    """Every result file's name fields and recorded fields; ValueError naming the first file at fault."""
    known = producers()
    out = []
    for path in sorted(p for p in results.iterdir() if p.name != INDEX):
        fields = parse_name(path.name, known)
        if fields["ext"] == "md":
            if not path.with_suffix(".json").exists():
                raise ValueError(f"benchmarks/results/{path.name}: a table without its {path.stem}.json")
            continue
        data = json.loads(path.read_text())
        rec = recorded(data if isinstance(data, dict) else {"rows": data})
        gpu = gpu_short_name(rec["device"]) if isinstance(rec["device"], str) else None
        if gpu is not None and gpu != fields["gpu"]:
            raise ValueError(f"benchmarks/results/{path.name}: named for {fields['gpu']!r}, "
                             f"but it records device {rec['device']!r}")
        if rec["date"] is not None and rec["date"] != fields["date"]:
            raise ValueError(f"benchmarks/results/{path.name}: named {fields['date']}, but it records run "
                             f"{rec['date']}")
        table = path.with_suffix(".md")
        out.append({"file": path.name, **fields, **{k: v for k, v in rec.items() if k != "date"},
                    "producer": known[fields["benchmark"]], "table": table.name if table.exists() else None})
    return out


def render(results: Path = RESULTS) -> str:
    """INDEX.md's text: one row per result, newest first."""
    lines = ["# Benchmark results",
             "",
             "Generated by `python benchmarks/index_results.py` from the files' names and contents; do not edit.",
             "What each run shows, with its code revision and environment: [docs/results/](../../docs/results/).",
             "",
             "| file | date | gpu | benchmark | variant | recorded device, torch, config | holds |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for e in sorted(entries(results), key=lambda e: (e["date"], e["file"]), reverse=True):
        recorded_as = ", ".join(str(v) for v in (e["device"], e["torch"], e["config"]) if v) or "-"
        holds = e["size"] + (f"; table [{e['table']}]({e['table']})" if e["table"] else "")
        lines.append(f"| [{e['file']}]({e['file']}) | {e['date']} | {e['gpu']} | `{e['benchmark']}` "
                     f"({e['producer']}) | {e['variant'] or '-'} | {recorded_as} | {holds} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail where a name or INDEX.md is not current")
    args = parser.parse_args()
    try:
        text = render()
    except ValueError as e:
        print(e, file=sys.stderr)
        return 1
    index = RESULTS / INDEX
    if args.check:
        if not index.exists() or index.read_text() != text:
            print(f"{index.relative_to(HERE.parent)} is not current: run python benchmarks/index_results.py",
                  file=sys.stderr)
            return 1
        return 0
    index.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
