"""Where client training and attacks run: the config key ``device``.

``"cpu"`` (the default), ``"cuda"``, or ``"auto"`` — CUDA when ``torch.cuda.is_available()``
in the process that trains or attacks, else the CPU. The library's tensor code is
device-agnostic (it allocates on its inputs' device, and every random draw uses a generator
on that device), so the device only decides where the model, the data and the generators
live. Noise drawn on a CUDA generator differs from noise drawn on the CPU with the same seed:
runs are reproducible on the same kind of device, not across kinds. CUDA runs are not verified
on this project's machines (no GPU); CPU is the tested path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedpriv.errors import InputError
from fedpriv.validate import check_choice

if TYPE_CHECKING:
    import torch

__all__ = ["DEVICES", "resolve_device"]

#: Values of the ``device`` key.
DEVICES = ("cpu", "cuda", "auto")


def resolve_device(name: str, key: str = "device") -> torch.device:
    """The torch device ``name`` stands for in this process.

    Raises
    ------
    InputError
        ``name`` is not one of :data:`DEVICES`, or is ``"cuda"`` where CUDA is unavailable.
    """
    import torch

    check_choice(key, name, DEVICES)
    cuda = torch.cuda.is_available()
    if name == "cuda" and not cuda:
        raise InputError(key, name, "'cpu' or 'auto' here: torch.cuda.is_available() is False")
    return torch.device("cuda" if name == "cuda" or (name == "auto" and cuda) else "cpu")
