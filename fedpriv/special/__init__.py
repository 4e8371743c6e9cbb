"""Special functions and samplers no maintained library offers at the sizes fedpriv needs.

Importing this package does not import torch (the samplers import it when called), nor scipy:
its names are imported on first use (:mod:`fedpriv.lazy`).
"""

from typing import TYPE_CHECKING

from fedpriv.lazy import lazy_exports

if TYPE_CHECKING:
    from fedpriv.special.bessel import log_iv, log_ive, log_normalized_ive
    from fedpriv.special.vmf_sampler import (
        sample_uniform_direction,
        sample_vmf,
        sample_vmf_cosine,
    )

__all__ = [
    "log_iv",
    "log_ive",
    "log_normalized_ive",
    "sample_uniform_direction",
    "sample_vmf",
    "sample_vmf_cosine",
]

__getattr__ = lazy_exports(__name__, {
    "log_iv": "bessel", "log_ive": "bessel", "log_normalized_ive": "bessel",
    "sample_uniform_direction": "vmf_sampler", "sample_vmf": "vmf_sampler",
    "sample_vmf_cosine": "vmf_sampler",
})
