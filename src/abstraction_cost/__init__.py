"""What abstraction costs in the PyTorch ecosystem: the package behind the Snakemake pipeline."""
