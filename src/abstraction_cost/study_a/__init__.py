"""Backends: the ways Study A runs the same ResNet-50 (eager, TorchScript, compiled, the C++ programs)."""
