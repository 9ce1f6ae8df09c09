"""Rule vision_timing_methods: pure / sync / timed / timed_sync × profiled / unprofiled, eager and compiled."""
from abstraction_cost import tables
from abstraction_cost.compiler import timing_methods
from abstraction_cost.compiler import vision_models as vm
from abstraction_cost.measure.run import measured_run
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
w, config = snakemake.wildcards, snakemake.config
case = vm.case_from_config(config, w.model, w.pair, config["study_b"]["models"]["layer_mode"])
with vm.compile_cache(config), measured_run(config, rule="vision_timing_methods", job=dict(w),
                                            env_path=snakemake.output.env, device=vm.run_device(case, config)) as run:
    rows = timing_methods.timing_methods(case, config, run)
for row in rows:
    row["run_id"] = run.run_id
df = tables.write("vision_timing_methods", rows, snakemake.output.table)
log.info("%s on %s: %d rows, statuses %s", case.model, case.pair, df.height, sorted(set(df["status"])))
