"""The processes either study launches: the C++ programs of native/ (native), a program under Nsight Compute (ncu),
and served workers, C++ or Python, answering commands with records (workers)."""
