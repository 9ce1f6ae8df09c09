"""The measurement core every experiment uses: timing, NVML sampling, allocator peaks, environment capture."""
