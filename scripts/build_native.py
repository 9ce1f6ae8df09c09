"""Rule build_native: configure and build one C++ program of native/ against the installed torch (incrementally).

A failed configure or compile fails this rule, so only the rules that need the program stop (with --keep-going
everything else goes on); the log holds every line CMake and the compiler printed, and the error quotes the first
compiler error.
"""
from pathlib import Path

from abstraction_cost.programs import native
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
program = snakemake.params.program
log.info("building %s from %d source files", program, len(snakemake.input))
exe = native.build(program, log, jobs=snakemake.threads, build_dir=Path(snakemake.params.build_dir))
if exe.resolve() != Path(snakemake.output[0]).resolve():
    raise RuntimeError(f"built {exe}, but the rule declares {snakemake.output[0]}")
log.info("built %s", exe)
