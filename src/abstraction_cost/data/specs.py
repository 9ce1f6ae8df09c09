"""The datasets the pipeline knows: their image shape and classes, known without downloading anything."""
from __future__ import annotations

from dataclasses import dataclass

VOC_CLASSES = ("aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
               "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train",
               "tvmonitor")
DIGIT_CLASSES = tuple(str(d) for d in range(10))
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
STL10_CLASSES = ("airplane", "bird", "car", "cat", "deer", "dog", "horse", "monkey", "ship", "truck")

REAL = ("mnist", "cifar10", "stl10", "voc2012")
OFFLINE = ("digits",) + tuple(f"synthetic-{name}" for name in REAL)
ALL = REAL + OFFLINE


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    channels: int
    height: int
    width: int
    class_names: tuple[str, ...]

    @property
    def classes(self) -> int:
        return len(self.class_names)

    @property
    def downloads(self) -> bool:
        return self.name in REAL


def spec(name: str, config: dict) -> DatasetSpec:
    """Shape and classes of a dataset under this config (PASCAL's and digits' resolutions are config)."""
    data = config["data"]
    base = name.removeprefix("synthetic-")
    voc = data["voc_resolution"]
    shapes = {
        "mnist": (1, 28, 28, DIGIT_CLASSES),
        "cifar10": (3, 32, 32, CIFAR10_CLASSES),
        "stl10": (3, 96, 96, STL10_CLASSES),
        "voc2012": (3, voc, voc, VOC_CLASSES),
        "digits": (1, data["digits"]["resolution"], data["digits"]["resolution"], DIGIT_CLASSES),
    }
    if base not in shapes or (name.startswith("synthetic-") and base not in REAL):
        raise KeyError(f"unknown dataset {name!r}; known: {list(ALL)}")
    c, h, w, names = shapes[base]
    return DatasetSpec(name, c, h, w, names)
