"""Study A: the ways it runs the same ResNet-50 (eager, TorchScript, AOTInductor, CUDA graphs, the C++ programs), its
training (training/), its backend comparison (comparison/) and its inference sweep (sweep/)."""
