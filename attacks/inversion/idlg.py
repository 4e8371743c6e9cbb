"""Improved DLG (Zhao, Mopuri & Bilen 2020, "iDLG: Improved deep leakage from gradients").

Labels are first recovered analytically from the last layer's gradient
(:func:`attacks.labels.recover_labels`, iDLG §3.1; count estimation for batches), then DLG's
L-BFGS gradient matching runs on the images alone with those hard labels: DLG with its label
strategy replaced.
"""

from __future__ import annotations

from dataclasses import replace

from attacks.inversion.dlg import dlg
from attacks.inversion.matching import AnalyticLabels, GradientMatcher
from attacks.inversion.optimisers import EARLY_STOP, LBFGS_OPTIONS
from attacks.registry import attack

__all__ = ["idlg"]


@attack("idlg", **LBFGS_OPTIONS)
def idlg(
    lr: float = 1.0, history_size: int = 100, line_search: str | None = None,
    early_stop: float = EARLY_STOP,
) -> GradientMatcher:
    """iDLG: analytic labels, then L-BFGS on the images; best restart by loss.

    Parameters
    ----------
    lr, history_size, line_search, early_stop
        As for :func:`attacks.inversion.dlg.dlg`.
    """
    return replace(dlg(lr, history_size, line_search, early_stop), labels=AnalyticLabels())
