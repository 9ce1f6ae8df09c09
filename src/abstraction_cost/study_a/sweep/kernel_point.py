"""The sweep's kernel point: the one cell whose kernels make the kernel table (kernels.py), and whether the
interleaved sweep's profiled pass gives them. The workflow reads it while it builds its DAG (which rules run), so
it imports no torch."""
from __future__ import annotations

from ...tables.study_a_sweep import STUDY_TRANSFER
from .cells import Cell, SweepSettings
from .summary import point_resolution


def point_cell(settings: SweepSettings, cells: list[Cell]) -> Cell | None:
    """The kernel point among a sweep job's `cells`: batch kernels.batch_size at the grid's resolution nearest
    kernels.resolution, float32 pageable as the study's PyTorch; None where the job has none."""
    point = (settings.kernel_batch, point_resolution(settings.resolutions, settings.kernel_resolution), STUDY_TRANSFER)
    return next((c for c in cells if (c.batch, c.resolution, c.transfer) == point), None)


def read_from_sweep(settings: SweepSettings, profile_calls: int) -> bool:
    """Whether the interleaved sweep's profiled passes give the kernel table (its kernel point is a cell of the
    grid, which profiles every cell); else rule sweep_kernels_job profiles the point in a job of its own."""
    return profile_calls > 0 and settings.kernel_batch in settings.batches and STUDY_TRANSFER in settings.transfers
