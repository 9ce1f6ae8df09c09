"""Rule vision_oracles: best of two runs, the dynamic programme and its exhaustive check for one model and pair."""
from abstraction_cost import tables
from abstraction_cost.compiler import vision_summary
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
o = snakemake.config["study_b"]["models"]["oracles"]
stats = snakemake.config["study_b"]["models"]["bootstrap"]
layers = tables.read("vision_layer_times", snakemake.input.layers)
rows = vision_summary.oracle_rows(layers, stats["resamples"], stats["confidence"], snakemake.config["seed"],
                                  o["max_exhaustive_blocks"])
df = tables.write("vision_oracles", rows, snakemake.output.table)
for r in df.iter_rows(named=True):
    log.info("%s %s %s: choice %s predicted %s ms (speedup %s), exhaustive agrees: %s", r["model"], r["pair"],
             r["oracle"], r["choice"], r["predicted_ms"], r["predicted_speedup"], r["dp_matches_exhaustive"])
    if r["dp_matches_exhaustive"] is False:
        raise RuntimeError(f"{r['model']}: the dynamic programme ({r['predicted_ms']} ms) missed the exhaustive "
                           f"optimum ({r['exhaustive_ms']} ms, {r['exhaustive_choice']}) of its own cost model")
