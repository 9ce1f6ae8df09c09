"""Inductor's compiles, the same in every process of either study: the cache key (cache_key) and a compiling
job's environment (inductor_env)."""
