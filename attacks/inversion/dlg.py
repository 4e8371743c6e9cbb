"""Deep Leakage from Gradients (Zhu, Liu & Han, NeurIPS 2019).

Minimise ‖∇θL(x', y') − g̃‖² over dummy inputs x' and dummy soft labels y' = softmax(ℓ')
with L-BFGS (Zhu et al. 2019, Algorithm 1 and eq. 4). The reference implementation uses
torch's L-BFGS with lr 1, history 100 and no line search; those are the defaults here, and one
"iteration" is one L-BFGS update (one gradient-matching evaluation without line search).
"""

from __future__ import annotations

from attacks.inversion.matching import GradientMatcher, SoftLabels
from attacks.inversion.objective import l2_distance
from attacks.inversion.optimisers import EARLY_STOP, LBFGS, LBFGS_OPTIONS
from attacks.registry import attack

__all__ = ["dlg"]


@attack("dlg", **LBFGS_OPTIONS)
def dlg(
    lr: float = 1.0, history_size: int = 100, line_search: str | None = None,
    early_stop: float = EARLY_STOP,
) -> GradientMatcher:
    """DLG: joint L-BFGS on dummy images and dummy soft labels; best restart by loss.

    Parameters
    ----------
    lr, history_size, line_search
        ``torch.optim.LBFGS`` settings (``line_search="strong_wolfe"`` or None).
    early_stop
        Stop when the float64 matching distance falls by less than this share of itself in
        :data:`~attacks.inversion.optimisers.CHECK_EVERY` iterations; 0 (default) runs them all.
    """
    return GradientMatcher(
        distance=l2_distance,
        labels=SoftLabels(),
        optimiser=LBFGS(lr, history_size, line_search),
        early_stop=early_stop,
    )
