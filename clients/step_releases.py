"""Steps mode on the client (``audit.release = "steps"``): every local step's release, sent
beside the update as the reply's second ArrayRecord (``fedpriv.protocol.STEPS_RECORD``).

The record has the update's names; each array is that tensor's slice of every step's flat
release, stacked along a leading step axis: shape ``(k, *tensor shape)``, the parameters'
dtype. A state entry that is not a trainable parameter (a buffer) gets zeros: no release moves
it. The server recomposes the update from these releases and tests each one alone
(fedpriv/verification/steps.py; docs/protocol.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from flwr.app import Array, ArrayRecord

__all__ = ["steps_record"]


def steps_record(model: torch.nn.Module, releases: Sequence[torch.Tensor]) -> ArrayRecord:
    """The ArrayRecord of ``releases`` (one flat tensor per step, in ``model.parameters()``
    order) under ``model.state_dict()``'s names."""
    stacked = torch.stack([r.detach() for r in releases]).cpu().numpy()
    k = stacked.shape[0]
    slices, offset = {}, 0
    for name, param in model.named_parameters():
        slices[name] = stacked[:, offset:offset + param.numel()].reshape(k, *param.shape)
        offset += param.numel()
    arrays = {}
    for name, value in model.state_dict().items():
        array = slices.get(name)
        if array is None:
            array = np.zeros((k, *value.shape), dtype=value.cpu().numpy().dtype)
        arrays[name] = Array(np.ascontiguousarray(array))
    return ArrayRecord(arrays)
