"""PNG grids of true images against their reconstructions (matplotlib, Agg, no pyplot)."""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedpriv.atomic import atomic_write_bytes

__all__ = ["MAX_COLUMNS", "Panel", "as_images", "write_grid"]

#: Images shown per batch (the first ones of the batch).
MAX_COLUMNS = 8


@dataclass(frozen=True)
class Panel:
    """One client's batch: a row of originals above a row of reconstructions."""

    label: str  # e.g. "client 3"
    caption: str  # e.g. "iga, SSIM 0.41"
    originals: np.ndarray  # (B, H, W) or (B, H, W, 3), values in [0, 1]
    reconstructions: np.ndarray


def _square(side2: float) -> int | None:
    side = math.isqrt(int(side2))
    return side if side * side == side2 else None


def as_images(array: np.ndarray) -> np.ndarray:
    """A batch as ``(B, H, W)`` grey or ``(B, H, W, 3)`` colour images clipped to [0, 1].

    Accepts ``(B, C, H, W)``, ``(B, H, W, C)`` with C ∈ {1, 3}, ``(B, H, W)``, and flat
    ``(B, D)`` with ``D = s²`` (grey) or ``D = 3s²`` (colour, channels first).
    """
    a = np.asarray(array, dtype=np.float64)
    if a.ndim == 2:
        grey, colour = _square(a.shape[1]), _square(a.shape[1] / 3)
        if grey is None and colour is None:
            raise ValueError(f"flat images of length {a.shape[1]} are not square")
        a = a.reshape(len(a), 1, grey, grey) if grey else a.reshape(len(a), 3, colour, colour)
    if a.ndim == 4 and a.shape[1] in (1, 3) and a.shape[-1] not in (1, 3):
        a = a.transpose(0, 2, 3, 1)
    if a.ndim == 4 and a.shape[-1] == 1:
        a = a[..., 0]
    if a.ndim not in (3, 4):
        raise ValueError(f"cannot show an array of shape {array.shape} as images")
    return np.clip(a, 0.0, 1.0)


def _rgb(images: np.ndarray) -> np.ndarray:
    return images if images.ndim == 4 else np.repeat(images[..., None], 3, axis=-1)


def _mosaic(rows: Sequence[np.ndarray], columns: int) -> tuple[np.ndarray, list[float]]:
    """Tile image rows into one RGB canvas (white gaps, a wider gap between panels);
    return it with the vertical centre of each row, in pixels."""
    height, width = rows[0].shape[1:3]
    gap, panel_gap = max(1, height // 16), max(2, height // 4)
    tops = [gap + i * (height + gap) + (i // 2) * panel_gap for i in range(len(rows))]
    canvas = np.ones((tops[-1] + height + gap, gap + columns * (width + gap), 3))
    for top, images in zip(tops, rows, strict=True):
        for j, image in enumerate(_rgb(images[:columns])):
            left = gap + j * (width + gap)
            canvas[top : top + height, left : left + width] = image
    return canvas, [top + height / 2 for top in tops]


def write_grid(path: Path, panels: Sequence[Panel], title: str) -> None:
    """Draw ``panels`` (two rows each) as one image mosaic; write the PNG atomically.

    Raises
    ------
    ValueError
        The panels' images differ in size.
    """
    from matplotlib.figure import Figure

    rows = [images for p in panels for images in (p.originals, p.reconstructions)]
    if len({images.shape[1:3] for images in rows}) != 1:
        raise ValueError("originals and reconstructions must share one image size")
    columns = min(MAX_COLUMNS, max(len(images) for images in rows))
    canvas, centres = _mosaic(rows, columns)
    scale = 1.2 / rows[0].shape[2]  # inches per pixel: 1.2 in per image
    width = canvas.shape[1] * scale + 1.6
    title = textwrap.fill(title, width=max(24, int(width * 13)))  # ~13 characters per inch
    top = 0.25 + 0.18 * title.count("\n") + 0.15
    height = canvas.shape[0] * scale + top
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((1.5 / width, 0.05 / height, 1 - 1.55 / width, 1 - top / height))
    ax.imshow(canvas, interpolation="nearest")
    ax.set_axis_off()
    for k, panel in enumerate(panels):
        shown = f" ({columns} of {len(panel.originals)})" if len(panel.originals) > columns else ""
        labels = (f"{panel.label}\noriginal{shown}", f"{panel.label}\n{panel.caption}")
        for centre, label in zip(centres[2 * k : 2 * k + 2], labels, strict=True):
            ax.text(-1, centre, label, ha="right", va="center", fontsize=8)
    fig.suptitle(title, fontsize=10)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    atomic_write_bytes(path, buffer.getvalue())
