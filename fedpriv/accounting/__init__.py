"""Privacy accounting (privacy-math.md §3): ε at δ per client, by RDP or PLD.

Generic over :class:`Release`: each mechanism's release class (``fedpriv/mechanisms/<name>.py``)
carries its RDP curve and PLD; this package composes, converts and calibrates. The name-based
front end of ``fedpriv account`` is :func:`fedpriv.commands.account.account`. Importing this
package is cheap (numpy, scipy.special); dp-accounting is imported only by the routes that need
it (the Gaussian, and any PLD). Its names are imported on first use (:mod:`fedpriv.lazy`): a
mechanism module that needs only :mod:`~fedpriv.accounting.events` does not import scipy, so
building ``fedpriv --help`` (which lists every mechanism's flags) stays light.
"""

from typing import TYPE_CHECKING

from fedpriv.lazy import lazy_exports

if TYPE_CHECKING:
    from fedpriv.accounting.accountant import AccountingResult, ClientAccountant, epsilon
    from fedpriv.accounting.calibrate import Calibration, calibrate
    from fedpriv.accounting.events import NoGuarantee, Release, ReleaseEvent
    from fedpriv.accounting.rdp import gaussian_rdp, laplace_rdp, vmf_rdp

__all__ = [
    "AccountingResult",
    "Calibration",
    "ClientAccountant",
    "NoGuarantee",
    "Release",
    "ReleaseEvent",
    "calibrate",
    "epsilon",
    "gaussian_rdp",
    "laplace_rdp",
    "vmf_rdp",
]

__getattr__ = lazy_exports(__name__, {
    "AccountingResult": "accountant", "ClientAccountant": "accountant", "epsilon": "accountant",
    "Calibration": "calibrate", "calibrate": "calibrate", "NoGuarantee": "events",
    "Release": "events", "ReleaseEvent": "events", "gaussian_rdp": "rdp",
    "laplace_rdp": "rdp", "vmf_rdp": "rdp",
})
