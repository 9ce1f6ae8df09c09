"""Rule vision_selective: the oracles' choices built and measured end to end beside eager and full compile."""
from abstraction_cost import tables
from abstraction_cost.compiler import selective
from abstraction_cost.compiler import vision_models as vm
from abstraction_cost.measure.run import measured_run
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
w, config = snakemake.wildcards, snakemake.config
case = vm.case_from_config(config, w.model, w.pair, config["study_b"]["models"]["layer_mode"])
oracles = tables.read("vision_oracles", snakemake.input.oracles)
with vm.compile_cache(config), measured_run(config, rule="vision_selective", job=dict(w),
                                            env_path=snakemake.output.env, device=vm.run_device(case, config)) as run:
    times, builds = selective.selective(case, config, oracles, run)
for row in times + builds:
    row["run_id"] = run.run_id
tables.write("vision_selective", times, snakemake.output.table)
tables.write("vision_builds", builds, snakemake.output.builds)
for b in builds:
    log.info("%s %s: %s, first call %s ms, %s graphs %s", case.model, b["variant"], b["status"],
             b["first_call_ms"], b["graphs"], b["message"] or "")
