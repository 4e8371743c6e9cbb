"""The per-example loss the gradients are taken of: cross-entropy unless the caller gives its own.

A loss here maps ``(outputs (B, ...), targets (B, ...))`` to the ``(B,)`` per-example losses, as
``torch.nn.CrossEntropyLoss(reduction="none")`` does; DP-SGD clips the gradient of each.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

__all__ = ["Loss", "cross_entropy"]

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``(outputs, targets) -> (B,)`` per-example losses."""


def cross_entropy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-example cross-entropy of logits ``(B, K)`` against class indices ``(B,)``."""
    return F.cross_entropy(outputs, targets, reduction="none")
