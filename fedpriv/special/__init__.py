"""Special functions and samplers no maintained library offers at the sizes fedpriv needs.

Importing this package does not import torch (the samplers import it when called).
"""

from fedpriv.special.bessel import log_iv, log_ive, log_normalized_ive
from fedpriv.special.vmf_sampler import sample_uniform_direction, sample_vmf, sample_vmf_cosine

__all__ = [
    "log_iv",
    "log_ive",
    "log_normalized_ive",
    "sample_uniform_direction",
    "sample_vmf",
    "sample_vmf_cosine",
]
