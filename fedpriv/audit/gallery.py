"""Stored attacks as the report shows them: scores, and true images beside their
reconstructions in the pairing the scorer used (:mod:`fedpriv.audit.pairing`)."""

from __future__ import annotations

import io
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedpriv.audit.errors import StoreError
from fedpriv.audit.figures import MAX_COLUMNS, as_images
from fedpriv.audit.pairing import NO_TRUTH, Pairing, pair_attack
from fedpriv.audit.reader import StoreReader
from fedpriv.leakage.game import GAME_ATTACK

__all__ = ["MAX_DRAWN", "SCORE_KEYS", "AttackView", "attack_views", "load_pairing", "strip_png"]

#: Attacks drawn with their images in one report (the most leaking, by SSIM); the rest are
#: listed with their scores only.
MAX_DRAWN = 60
#: Columns of an attack's scores, in table order.
SCORE_KEYS = (
    "iterations",
    "restarts",
    "trials",
    "mse",
    "psnr",
    "ssim",
    "best_mse",
    "best_psnr",
    "best_ssim",
    "label_accuracy",
    "relative_leakage",
    "support_ssim",
    "prior_ssim",
    "gain_ssim",
    "gain_psnr",
    "no_update_prior_ssim",
    "no_update_gain_ssim",
    "identification_log_value",
    "identification_log_lower",
    "identification_log_bound",
)
#: The columns of :data:`SCORE_KEYS` (and the candidates) that come from the attack's scores.
_FLAT_SHOWN = ("support_ssim", "prior_ssim", "no_update_prior_ssim", "no_update_gain_ssim",
               "identification_log_value", "identification_log_lower",
               "identification_log_bound", "identification_candidates")
_PIXELS = 64  # an image's height on the page, about
log = logging.getLogger(__name__)
Row = Mapping[str, Any]


@dataclass(frozen=True)
class AttackView:
    """One stored attack: where, which, its scores; with ``png`` (true row above the
    reconstruction row) when drawn, how the columns were paired, the number of images, and
    whether a reconstruction is stored at all."""

    round: int
    client_id: int
    attack: str
    scores: dict[str, Any] = field(default_factory=dict)
    png: bytes | None = None
    pairing: str | None = None
    note: str = ""
    images: int = 0
    stored: bool = False


def load_pairing(store: StoreReader, attack: Row) -> Pairing | None:
    """The stored true batch and reconstruction of ``attack``, paired; the reconstruction
    alone (:data:`~fedpriv.audit.pairing.NO_TRUTH`) where no true batch is stored; None
    where no reconstruction is (or either cannot be read: logged)."""
    try:
        recon = store.load_reconstruction(attack["attack_id"])
        recons = as_images(recon.get("images", next(iter(recon.values()))))
        try:
            truth = store.load_ground_truth(attack["round"], attack["client_id"])
        except KeyError:
            return Pairing(np.zeros((0, *recons.shape[1:])), recons, NO_TRUTH,
                           "no true batch stored: the reconstructions alone")
        originals = as_images(truth.get("images", next(iter(truth.values()))))
        return pair_attack(originals, recons, attack["mse"])
    except KeyError:
        return None
    except (StoreError, ValueError) as exc:
        log.warning(
            "no images for client %s, round %s: %s", attack["client_id"], attack["round"], exc
        )
        return None


def _rgb(images: np.ndarray) -> np.ndarray:
    return images if images.ndim == 4 else np.repeat(images[..., None], 3, axis=-1)


def strip_png(pairing: Pairing, columns: int = MAX_COLUMNS) -> bytes:
    """A PNG of the first ``columns`` true images (top row) above their reconstructions,
    each scaled by a whole factor to about 64 pixels high, on white; the pairing's images
    are ``(B, H, W)`` grey or ``(B, H, W, 3)`` colour (:func:`~fedpriv.audit.figures.as_images`)."""
    from matplotlib.image import imsave

    rows = [_rgb(pairing.originals[:columns]), _rgb(pairing.reconstructions[:columns])]
    height, width = rows[0].shape[1:3]
    scale = max(1, round(_PIXELS / height))
    gap = max(2, scale)
    count = max(len(r) for r in rows)
    canvas = np.ones((2 * height * scale + 3 * gap, count * (width * scale + gap) + gap, 3))
    for i, images in enumerate(rows):
        top = gap + i * (height * scale + gap)
        for j, image in enumerate(images):
            left = gap + j * (width * scale + gap)
            big = np.repeat(np.repeat(image, scale, axis=0), scale, axis=1)
            canvas[top : top + height * scale, left : left + width * scale] = big
    buffer = io.BytesIO()
    imsave(buffer, canvas, format="png")
    return buffer.getvalue()


def _best_per_client_round(attacks: Sequence[Row]) -> list[Row]:
    """Per (round, client) the stored reconstruction with the highest SSIM."""
    best: dict[tuple[int, int], Row] = {}
    for a in attacks:
        if a["tensor_id"] is None:
            continue
        key = (a["round"], a["client_id"])
        if key not in best or (a["ssim"] or -1.0) > (best[key]["ssim"] or -1.0):
            best[key] = a
    return sorted(best.values(), key=lambda a: (-(a["ssim"] or -1.0), a["round"], a["client_id"]))


def _scores(attack: Row, tally: Row | None) -> dict[str, Any]:
    """The row's score columns with the priors', the gains' and the identification score's
    (:func:`fedpriv.audit.report_attack.flat_scores`)."""
    from fedpriv.audit.report_attack import flat_scores

    flat = flat_scores(attack, tally)
    return {**{k: attack.get(k) for k in SCORE_KEYS},
            **{k: flat[k] for k in _FLAT_SHOWN}}


def _trials(attack: Row) -> dict[str, Any]:
    """The identification game stores its trials in the attack row's ``restarts`` column
    (it restarts nothing): shown as ``trials``."""
    if attack["attack"] != GAME_ATTACK:
        return {}
    return {"trials": attack.get("restarts"), "restarts": None}


def attack_views(
    store: StoreReader, attacks: Sequence[Row], limit: int = MAX_DRAWN
) -> list[AttackView]:
    """Every attack row of ``attacks`` (round, then client order) as a view; the best
    reconstruction per client and round is drawn, at most ``limit`` of them, the highest
    SSIM first."""
    drawn: dict[int, tuple[bytes, Pairing]] = {}
    for attack in _best_per_client_round(attacks)[:limit]:
        pairing = load_pairing(store, attack)
        if pairing is not None:
            drawn[attack["attack_id"]] = (strip_png(pairing), pairing)
    tallies = {(t["round"], t["client_id"]): t for t in store.query(
        "SELECT round, client_id, log_capacity_round, threat_model FROM tallies")}
    views = []
    for a in sorted(attacks, key=lambda a: (a["round"], a["client_id"], a["attack_id"])):
        png, pairing = drawn.get(a["attack_id"], (None, None))
        views.append(AttackView(
            round=a["round"], client_id=a["client_id"], attack=a["attack"],
            scores={**_scores(a, tallies.get((a["round"], a["client_id"]))), **_trials(a)},
            png=png,
            pairing=None if pairing is None else pairing.status,
            note="" if pairing is None else pairing.note,
            images=0 if pairing is None else len(pairing.reconstructions),
            stored=a["tensor_id"] is not None,
        ))  # fmt: skip
    return views
