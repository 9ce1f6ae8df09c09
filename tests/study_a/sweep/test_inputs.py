"""The sweep's inputs: each cell's host and device input in every transfer mode, from the pool of images."""
from __future__ import annotations

import pytest
import torch

from abstraction_cost.study_a import transfer

from tests.fixtures.sweep_fakes import pool_dir  # noqa: F401 (fixtures)


@pytest.mark.parametrize("mode,dtype,nbytes", [("float32-pageable", torch.float32, 3 * 3 * 8 * 8 * 4),
                                               ("uint8-pinned", torch.uint8, 3 * 3 * 8 * 8)])
def test_cell_input_has_the_cells_exact_shape_and_same_values(pool_dir, mode, dtype, nbytes):
    pool = transfer.Pool(pool_dir)
    data = transfer.cell_input(pool, 3, 8, mode, torch.device("cpu"))
    assert data.host is None and data.device_buffer.dtype == dtype and not data.device_buffer.any()
    data.load(pool)
    assert data.host.dtype == dtype and data.nbytes == nbytes
    images = torch.from_numpy(pool.images(8))[[0, 1, 0]]  # batch 3 from a pool of 2: the pool repeated in order
    expected = images if dtype == torch.uint8 else (images.float() / 255.0 - 0.5) / 0.25  # the manifest's mean, std
    assert torch.equal(data.host, expected)
    x = data.to_device()
    assert x.shape == (3, 3, 8, 8) and x.dtype == torch.float32
    other = transfer.cell_input(pool, 3, 8, "float32-pinned", torch.device("cpu"))
    other.load(pool)
    torch.testing.assert_close(x, other.to_device())  # uint8 normalised on the device = float32 on the host
    torch.testing.assert_close(x[2], x[0])  # batch 3 from a pool of 2 repeats the pool in order
