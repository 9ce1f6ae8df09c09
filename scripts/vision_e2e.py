"""Rule vision_e2e: one model on one pair in one compile mode, eager against compiled and the eager baselines."""
from abstraction_cost import tables
from abstraction_cost.compiler import vision_models as vm
from abstraction_cost.measure.run import measured_run
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
w, config = snakemake.wildcards, snakemake.config
case = vm.case_from_config(config, w.model, w.pair, w.mode)
with vm.compile_cache(config), measured_run(config, rule="vision_e2e", job=dict(w), env_path=snakemake.output.env,
                                            device=vm.run_device(case, config)) as run:
    times, builds = vm.end_to_end(case, config, run)
for row in times + builds:
    row["run_id"] = run.run_id
tables.write("vision_e2e", times, snakemake.output.table)
tables.write("vision_builds", builds, snakemake.output.builds)
for b in builds:
    log.info("%s %s %s: %s, first call %s ms, %s graphs, %s graph breaks %s", case.model, b["configuration"],
             b["variant"], b["status"], b["first_call_ms"], b["graphs"], b["graph_breaks"], b["message"] or "")
