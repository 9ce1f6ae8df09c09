"""Rule vision_summaries: speedups, timing-variant medians, per-layer times and selective compilation, with
bootstrap intervals, from the measured vision tables; each summary's env sidecar holds its source jobs' rows."""

from abstraction_cost import tables
from abstraction_cost.study_b.models import summary as vs
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
b = snakemake.config["study_b"]["models"]["bootstrap"]
args = (b["resamples"], b["confidence"], snakemake.config["seed"])
inp, out = snakemake.input, snakemake.output
measured = {"vision_e2e": tables.read("vision_e2e", inp.e2e),
            "vision_timing_methods": tables.read("vision_timing_methods", inp.timing),
            "vision_layer_times": tables.read("vision_layer_times", inp.layers),
            "vision_selective": tables.read("vision_selective", inp.selective)}
written = {
    "vision_speedups": (vs.speedup_rows(measured["vision_e2e"], *args, timing=measured["vision_timing_methods"]),
                        inp.e2e_env),
    # the jobs' environment rows are the same in every measured table's sidecar (one row per job)
    "vision_eager_baselines": (vs.eager_baseline_rows(measured, *args), inp.e2e_env),
    "vision_timing_summary": (vs.timing_summary_rows(measured["vision_timing_methods"], *args),
                              inp.timing_env),
    "vision_layer_summary": (vs.layer_summary_rows(measured["vision_layer_times"],
                                                   tables.read("vision_oracles", inp.oracles), *args),
                             inp.layers_env),
    "vision_selective_summary": (vs.selective_summary_rows(measured["vision_selective"],
                                                           tables.read("vision_oracles", inp.oracles), *args),
                                 inp.selective_env),
}
for name, (rows, env) in written.items():
    df = tables.write(name, rows, getattr(out, name))
    tables.write("environment", tables.read("environment", env), getattr(out, f"{name}_env"))
    log.info("%s: %d rows", name, df.height)
