"""Rules of workflow/rules/derived.smk: each input is a table by name, each output a derived table by name."""
from abstraction_cost import tables
from abstraction_cost.derived import breakeven, decomposition, energy, oracle_curve, precision, predictor, roofline
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
frames = {name: tables.read(name, path) for name, path in snakemake.input.items()}
outputs = dict(snakemake.output.items())
if "precision" in outputs:
    made = {"precision": precision.precision_rows(frames)}
elif "energy" in outputs:
    made = {"energy": energy.energy_rows(frames["sweep"], frames["backend_comparison"], frames["backend_eval"])}
elif "compile_breakeven" in outputs:
    made = {"compile_breakeven": breakeven.breakeven_rows(frames)}
elif "vision_oracle_curve" in outputs:
    made = {"vision_oracle_curve": oracle_curve.oracle_curve_rows(frames["vision_layer_summary"])}
elif "conv_predictor" in outputs:
    rows, summary = predictor.predictor_rows(frames["study_b_resnet50_conv_speedups"])
    made = {"conv_predictor": rows, "conv_predictor_summary": summary}
elif "decomposition" in outputs:
    made = {"decomposition": decomposition.decomposition_rows(
        frames["sweep"], frames.get("sweep_profile", tables.frame("sweep_profile", [])),
        frames["backend_comparison"], frames["backend_eval"], frames.get("backend_profile"),
        frames.get("vision_e2e"), frames.get("vision_profile"))}
elif "roofline" in outputs:
    made = {"roofline": roofline.roofline_rows(
        frames["flops"], frames["sweep"], frames.get("sweep_profile", tables.frame("sweep_profile", [])),
        frames["vision_speedups"], frames["study_b_matmul_speedups"], snakemake.params.peak_numerics)}
else:
    raise ValueError(f"derived_tables.py: no derived table among the outputs {sorted(outputs)}")
for name, df in made.items():
    tables.write(name, df, outputs[name])
    log.info("%s: %d rows from %s", name, df.height, ", ".join(f"{n} ({f.height})" for n, f in frames.items()))
