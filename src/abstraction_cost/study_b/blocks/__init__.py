"""Study B's building blocks: matmul, convolutions and conv blocks, their cases, interleaved timing and speedups."""
