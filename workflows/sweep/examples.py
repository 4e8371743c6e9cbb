"""Example reconstructions of a cell, taken from its run's audit store for the figure grid.

For the first attacked client (lowest id) the stored true batch and the stored reconstruction
are paired as stored when that reproduces the scored MSE (:func:`fedpriv.audit.pairing.
pair_attack`), else again by minimum-cost assignment on pixel MSE
(:func:`attacks.scoring.match_reconstructions`, the scorer's own pairing; none beyond
:data:`~fedpriv.audit.pairing.MAX_MATCH_PAIRS` pairs) and the first
``count`` images of the true batch are kept with their reconstructions. Every cell attacks the
same round-1 batch (:func:`workflows.sweep.plan.cell_config`), so the same originals appear in
every cell and the grid compares like with like.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fedpriv.audit.figures import as_images

__all__ = ["EXAMPLES", "example_images"]

EXAMPLES = 4
"""Images of the true batch shown per cell."""

log = logging.getLogger(__name__)


def _first_attack(report: Mapping[str, Any]) -> tuple[int, Mapping[str, Any]] | None:
    attacked = [c for c in report.get("clients", []) if c.get("attack")]
    if not attacked:
        return None
    client = min(attacked, key=lambda c: c["client_id"])
    return client["client_id"], client["attack"]


def example_images(
    run_dir: Path, report: Mapping[str, Any], count: int = EXAMPLES
) -> dict[str, np.ndarray] | None:
    """``{"originals", "reconstructions"}`` (each ``(k, H, W)`` or ``(k, H, W, 3)``, values in
    [0, 1]) of the first attacked update, or None when the run stored no reconstruction."""
    from attacks.scoring import match_reconstructions
    from fedpriv.audit import StoreReader
    from fedpriv.audit.errors import StoreError
    from fedpriv.audit.pairing import MAX_MATCH_PAIRS, PAIRED_AS_STORED, pair_attack

    found = _first_attack(report)
    if found is None:
        return None
    client_id, attack = found
    try:
        with StoreReader.open(run_dir, readonly=True) as store:
            truth = store.load_ground_truth(attack["round"], client_id)["images"]
            recon = store.load_reconstruction(attack["attack_id"])["images"]
    except (KeyError, StoreError) as exc:
        log.warning("no example images in %s: %s", run_dir, exc)
        return None
    originals, recons = as_images(truth)[:count], as_images(recon)
    if pair_attack(truth, recon, attack.get("mse")).status == PAIRED_AS_STORED:
        return {"originals": originals, "reconstructions": recons[: len(originals)]}
    if len(recons) * len(truth) > MAX_MATCH_PAIRS:  # a round's every record, not a batch
        log.warning("no example images in %s: %d reconstructions against %d true images are "
                    "over %d pairs to match", run_dir, len(recons), len(truth), MAX_MATCH_PAIRS)
        return None
    order = match_reconstructions(recons, as_images(truth))[: len(originals)]
    hit = (order >= 0).reshape(-1, *([1] * (recons.ndim - 1)))
    matched = np.where(hit, recons[np.maximum(order, 0)], np.nan)  # NaN: left unmatched
    return {"originals": originals, "reconstructions": matched}
