"""Privacy accounting (privacy-math.md §3): ε at δ per client, by RDP or PLD.

Importing this package is cheap (numpy, scipy.special); dp-accounting is imported only by the
routes that need it (the Gaussian, and any PLD).
"""

from fedpriv.accounting.accountant import AccountingResult, ClientAccountant, epsilon
from fedpriv.accounting.api import account
from fedpriv.accounting.calibrate import Calibration, calibrate
from fedpriv.accounting.events import Release, ReleaseEvent
from fedpriv.accounting.rdp import gaussian_rdp, laplace_rdp, vmf_rdp

__all__ = [
    "AccountingResult",
    "Calibration",
    "ClientAccountant",
    "Release",
    "ReleaseEvent",
    "account",
    "calibrate",
    "epsilon",
    "gaussian_rdp",
    "laplace_rdp",
    "vmf_rdp",
]
