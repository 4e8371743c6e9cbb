"""Improved DLG (Zhao, Mopuri & Bilen 2020, "iDLG: Improved deep leakage from gradients").

Labels are first recovered analytically from the last layer's gradient
(:func:`attacks.labels.recover_labels`, iDLG §3.1; count estimation for batches), then DLG's
L-BFGS gradient matching runs on the images alone with those hard labels.
"""

from __future__ import annotations

import torch

from attacks.inversion.matching import AnalyticLabels, GradientMatcher
from attacks.inversion.objective import l2_distance
from attacks.inversion.optimisers import LBFGS, LBFGS_OPTIONS
from attacks.registry import attack
from attacks.result import Trial
from attacks.view import ServerView

__all__ = ["idlg"]


@attack("idlg", **LBFGS_OPTIONS)
def idlg(
    view: ServerView,
    *,
    iterations: int,
    restarts: int,
    generator: torch.Generator,
    num_images: int,
    device: torch.device,
    lr: float = 1.0,
    history_size: int = 100,
    line_search: str | None = None,
) -> Trial:
    """iDLG: analytic labels, then L-BFGS on the images; best restart by loss.

    Parameters
    ----------
    view
        The server's view of the update.
    iterations, restarts, generator, num_images, device
        See :func:`attacks.registry.run_attack`.
    lr, history_size, line_search
        ``torch.optim.LBFGS`` settings (``line_search="strong_wolfe"`` or None).
    """
    matcher = GradientMatcher(
        distance=l2_distance,
        labels=AnalyticLabels(),
        optimiser=LBFGS(lr, history_size, line_search),
    )
    return matcher.run(view, iterations=iterations, restarts=restarts, generator=generator,
                       num_images=num_images, device=device)
