"""``reconstructions.png``: one row of true images, then one row per mechanism, one column per
target ε; every panel shows the same true images (the round-1 batch every cell attacked) or
that cell's reconstructions of them, captioned with the cell's MSE and SSIM."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from workflows.sweep.plan import cell_key
from workflows.sweep.style import style

__all__ = ["strip", "write_grid"]

Row = Mapping[str, Any]
Images = Mapping[str, np.ndarray]


def strip(images: np.ndarray, gap: int = 1) -> np.ndarray:
    """Images ``(k, H, W[, 3])`` side by side with ``gap`` columns of NaN between them."""
    k, height = images.shape[:2]
    spacer = np.full((height, gap, *images.shape[3:]), np.nan)
    parts: list[np.ndarray] = []
    for i, image in enumerate(images):
        parts.extend([spacer, image] if i else [image])
    return np.concatenate(parts, axis=1) if k else np.full((height, 1), np.nan)


def _show(ax: Any, images: np.ndarray | None, caption: str) -> None:
    from matplotlib import colormaps

    ax.set_xticks([])
    ax.set_yticks([])
    if images is None:
        ax.text(0.5, 0.5, "no images\nstored", ha="center", va="center", fontsize=12,
                transform=ax.transAxes)
    else:
        cmap = colormaps["gray"].with_extremes(bad="white")
        ax.imshow(strip(images), cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest")
    ax.set_xlabel(caption, fontsize=12)


def _caption(row: Row | None) -> str:
    if row is None:
        return "not run"
    mse, ssim = (math.nan if row.get(k) is None else float(row[k]) for k in ("mse", "ssim"))
    return f"batch MSE {mse:.3f}, SSIM {ssim:.2f}"


def _originals(images: Mapping[str, Images | None], keys: Sequence[str]) -> np.ndarray | None:
    for key in keys:
        found = images.get(key)
        if found is not None:
            return found["originals"]
    return None


def write_grid(
    rows: Sequence[Row],
    images: Mapping[str, Images | None],
    path: Path,
    save: Callable[[Any, Path], str],
) -> str:
    """Draw the grid (module docstring) and write it with ``save(figure, path)``."""
    from matplotlib.figure import Figure

    mechanisms = list(dict.fromkeys(r["mechanism"] for r in rows))
    epsilons = sorted({float(r["epsilon"]) for r in rows})
    by_key = {cell_key(r["mechanism"], float(r["epsilon"])): r for r in rows}
    fig = Figure(figsize=(3.2 * len(epsilons) + 1.2, 1.5 * (len(mechanisms) + 1) + 0.8))
    axes = np.atleast_2d(fig.subplots(len(mechanisms) + 1, len(epsilons), squeeze=False))
    for j, eps in enumerate(epsilons):
        keys = [cell_key(m, eps) for m in mechanisms]
        _show(axes[0, j], _originals(images, keys), "true images")
        axes[0, j].set_title(f"ε = {eps:g}", fontsize=15)
        for i, key in enumerate(keys, start=1):
            found = images.get(key)
            recon = None if found is None else found["reconstructions"]
            _show(axes[i, j], recon, _caption(by_key.get(key)))
    for i, label in enumerate(["original", *(style(m)[0] for m in mechanisms)]):
        axes[i, 0].set_ylabel(label, fontsize=15)
    fig.suptitle("Round-1 reconstructions at matched ε (same true images in every column)",
                 fontsize=16)
    fig.tight_layout()
    return save(fig, path)
