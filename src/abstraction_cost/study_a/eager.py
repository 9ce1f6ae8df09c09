"""Backend `eager`: ResNet-50 as a PyTorch nn.Module, trained and evaluated from Python.

The semantics every training backend shares (native/libtorch matches them step for step):
- epoch e visits the training set in row e of the sample-order file, in consecutive batches (last one partial);
- a batch's uint8 images are copied to the device and normalised there: (x / 255 - mean) / std per channel;
- train step: cross-entropy (mean over the batch), backward, SGD (lr, momentum, weight decay; no dampening,
  no Nesterov);
- after each epoch, evaluation on the test split in order, in batches of eval_batch_size, eval mode, no grad;
- a timed step runs from just before the host-to-device copy to just after the optimizer step (train) or the
  logits (eval): CUDA events on a GPU, read once per phase so that timing adds no synchronisation.
"""
from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F

from ..config import TrainingSettings
from ..data.prepared import Prepared, Split
from ..measure.run import Run
from ..measure.timing import StepTimer


class Normaliser:
    """uint8 N×C×H×W on the host -> normalised float32 on the device."""

    def __init__(self, mean: list[float], std: list[float], device: torch.device):
        self.device = device
        self.mean = torch.tensor(mean, dtype=torch.float32, device=device).view(1, -1, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32, device=device).view(1, -1, 1, 1)

    def __call__(self, images: np.ndarray) -> torch.Tensor:
        x = torch.from_numpy(images).to(self.device, non_blocking=False)
        return (x.float().div_(255.0) - self.mean) / self.std


def batches(count: int, batch_size: int):
    for start in range(0, count, batch_size):
        yield slice(start, min(start + batch_size, count))


class PhaseStats:
    """Sample-weighted loss and accuracy, accumulated on the device to avoid a sync per step."""

    def __init__(self, device: torch.device):
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.correct = torch.zeros((), dtype=torch.int64, device=device)
        self.samples = 0

    def add(self, logits: torch.Tensor, labels: torch.Tensor, loss: torch.Tensor) -> None:
        self.loss_sum += loss.detach().double() * labels.shape[0]
        self.correct += (logits.argmax(dim=1) == labels).sum()
        self.samples += labels.shape[0]

    def result(self) -> dict:
        n = max(self.samples, 1)
        return {"loss": self.loss_sum.item() / n, "accuracy": self.correct.item() / n, "samples": self.samples}


def train_epoch(model, optimizer, split: Split, indices: np.ndarray, batch_size: int, normalise: Normaliser,
                timer: StepTimer) -> PhaseStats:
    model.train()
    stats = PhaseStats(normalise.device)
    for part in batches(len(indices), batch_size):
        idx = indices[part]
        images, labels = split.images[idx], split.labels[idx]  # host-side gather, before the timed step
        timer.start()
        x = normalise(images)
        y = torch.from_numpy(labels).to(normalise.device)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        timer.stop()
        stats.add(logits, y, loss)
    return stats


@torch.no_grad()
def evaluate(model, split: Split, batch_size: int, normalise: Normaliser, timer: StepTimer) -> PhaseStats:
    model.eval()
    stats = PhaseStats(normalise.device)
    for part in batches(len(split.labels), batch_size):
        images, labels = np.array(split.images[part]), np.array(split.labels[part])  # copies off the map
        timer.start()
        x = normalise(images)
        y = torch.from_numpy(labels).to(normalise.device)
        logits = model(x)
        timer.stop()
        stats.add(logits, y, F.cross_entropy(logits, y))
    return stats


def make_optimizer(model: torch.nn.Module, settings: TrainingSettings) -> torch.optim.SGD:
    return torch.optim.SGD(model.parameters(), lr=settings.lr, momentum=settings.momentum,
                           weight_decay=settings.weight_decay)


def train(model: torch.nn.Module, data: Prepared, order: np.ndarray, settings: TrainingSettings, run: Run) -> list[dict]:
    """Train for settings.epochs, evaluating after each; one row per (epoch, phase) with the run's measures."""
    model.to(run.device)
    optimizer = make_optimizer(model, settings)
    normalise = Normaliser(data.mean, data.std, run.device)
    rows = []
    for epoch in range(settings.epochs):
        for phase in ("train", "eval"):
            timer = StepTimer(run.device)
            name = f"{phase}-{epoch}"
            wall = time.perf_counter()
            with run.phase(name):
                if phase == "train":
                    stats = train_epoch(model, optimizer, data.train, order[epoch], settings.batch_size,
                                        normalise, timer)
                else:
                    stats = evaluate(model, data.test, settings.eval_batch_size, normalise, timer)
                result = stats.result()  # synchronises: the phase ends when its work is done
            wall = time.perf_counter() - wall
            time_s = sum(timer.elapsed_ms()) / 1000.0
            rows.append({"epoch": epoch, "phase": phase, "status": "ok", "message": None, **result,
                         "time_s": time_s, "time_per_sample_ms": 1000.0 * time_s / max(result["samples"], 1),
                         "wall_s": wall, **run.measures(name)})
    return rows
