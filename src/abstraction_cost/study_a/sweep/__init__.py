"""Study A's inference sweep: cells, the serial walk and the Python model, the interleaved job, its conductor and
workers, shards, kept cells, output checks of the C++ programs, kernel tables and summaries."""
