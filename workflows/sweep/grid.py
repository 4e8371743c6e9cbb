"""``reconstructions.png``: per batch size, one row of true images, then one row per mechanism
with its cells from the most to the least noise (ε ascending), then the cells without a
guarantee; every panel shows the first seed's true images (the first batch every cell of that
batch size and seed attacked) or that cell's reconstructions of them, captioned with ε and the
cell's MSE and SSIM (means over seeds)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from workflows.sweep.rows import Row, number, series
from workflows.sweep.style import label

__all__ = ["strip", "write_grid"]

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
    ax.set_xlabel(caption, fontsize=11)


def _caption(row: Row) -> str:
    mse, ssim, eps = (number(row.get(k)) for k in ("mse", "ssim", "epsilon"))
    head = "no guarantee" if math.isinf(eps) else f"ε = {eps:.3g}"
    return f"{head}\nMSE {mse:.3f}, SSIM {ssim:.2f}"


def _layout(rows: Sequence[Row]) -> list[tuple[str, int, list[Row]]]:
    """Figure rows: ``(label, batch size, cells)``; an empty cell list marks the originals."""
    out: list[tuple[str, int, list[Row]]] = []
    for batch in sorted({int(r["batch_size"]) for r in rows}):
        out.append(("original", batch, []))
        for mech, b in series(rows):
            if b == batch:
                mine = [r for r in rows if (r["mechanism"], r["batch_size"]) == (mech, b)
                        and r.get("parameter_name") is not None]
                out.append((label(mech), batch, sorted(mine, key=lambda r:
                                                          number(r["epsilon"]))))
        bare = [r for r in rows if r["batch_size"] == batch and r.get("parameter_name") is None]
        if bare:
            out.append((" / ".join(label(r["mechanism"]) for r in bare), batch, bare))
    return out


def _originals(images: Mapping[str, Images | None], rows: Sequence[Row],
               batch: int) -> np.ndarray | None:
    for row in rows:
        found = images.get(row["cell"]) if row["batch_size"] == batch else None
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

    layout = _layout(rows)
    columns = max([len(cells) for _, _, cells in layout] + [1])
    several = len({b for _, b, _ in layout}) > 1
    fig = Figure(figsize=(3.0 * columns + 1.2, 1.7 * len(layout) + 0.8))
    axes = np.atleast_2d(fig.subplots(len(layout), columns, squeeze=False))
    for i, (name, batch, cells) in enumerate(layout):
        if not cells:
            _show(axes[i, 0], _originals(images, rows, batch), "true images")
        for j, row in enumerate(cells):
            found = images.get(row["cell"])
            _show(axes[i, j], None if found is None else found["reconstructions"],
                  _caption(row))
        for j in range(max(len(cells), 1), columns):
            axes[i, j].set_axis_off()
        axes[i, 0].set_ylabel(f"{name}\nL = {batch}" if several else name, fontsize=14)
    fig.suptitle("Reconstructions, first seed (the same true images along each batch size)",
                 fontsize=16)
    fig.tight_layout()
    return save(fig, path)
