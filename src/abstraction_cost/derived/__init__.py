"""Tables computed from measured tables for the report (rules of workflow/rules/derived.smk; schemas in
tables/derived.py): no plotting package needed, so a rule can run them on any machine.

- precision:    interval widths, counts and spread per experiment ("how precise these numbers are");
- energy:       energy per sample from NVML's mean power and the time per sample;
- breakeven:    after how many calls a build (TorchScript, AOTInductor, torch.compile) pays for itself;
- oracle_curve: Study B Fig. 5.9, cumulative per-layer times of eager, compiled and the oracles;
- predictor:    Study B Fig. 5.4, an MLP predicting a convolution's speedup from its parameters.
"""
