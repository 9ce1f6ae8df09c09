"""Study B: what torch.compile costs and gains, on building blocks (blocks/) and on vision models (models/), under
the configurations of configurations.py, with the compile-cache warm-up of its timing jobs (compile_cache)."""
