"""Datasets: downloads through torchvision, the prepared format every backend reads, offline sources."""
