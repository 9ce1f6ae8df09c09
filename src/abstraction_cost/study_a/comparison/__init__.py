"""Study A's backend comparison: the eval job, one per numerics (job), run interleaved (interleaved) or serially (serial),
its kept progress (store), and the comparison table (compare)."""
