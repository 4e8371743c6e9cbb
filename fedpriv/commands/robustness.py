"""The library function behind ``fedpriv robustness``: input robustness α from privacy leakage
(Zhang & Chen, Theorem 5.5) and, optionally, the PAC-robustness confidence of Theorem 4.3
(privacy-math.md §6; the statements as implemented are in :mod:`fedpriv.leakage.robustness`).

The report lists every constant the user supplies as an assumption fedpriv cannot check
(:data:`ASSUMPTIONS`). Bad inputs raise :class:`~fedpriv.errors.InputError` naming the library
key (the command line renames it to its flag).
"""

from __future__ import annotations

from typing import Any

from fedpriv.errors import InputError
from fedpriv.leakage.robustness import input_robustness, pac_robust_confidence

__all__ = ["ASSUMPTIONS", "robustness_report"]

ASSUMPTIONS = {
    "lipschitz": "C, the Lipschitz constant of the model/loss in its input (Theorem 5.5)",
    "radius": "r, the radius of the input perturbations considered",
    "diameter": "D, the bound on the parameter space",
    "c_a": "c_a, an algorithm constant of Theorem 5.5",
    "c_b": "c_b, an algorithm constant of Theorem 5.5",
    "c_2": "c_2, an algorithm constant of Theorem 5.5",
    "i_const": "I, the base of the term I^(p-1) of Theorem 5.5",
    "p_const": "p, the exponent's parameter in I^(p-1) (not assumed to be the model dimension)",
    "leakage": "eps_p, the privacy leakage in the paper's own measure, in [0, 1]: say where it "
    "comes from (e.g. an ABP estimate or bound of fedpriv, privacy-math.md section 6)",
}
"""Every input of Theorem 5.5 is a claim fedpriv cannot check: what each one asserts."""


def robustness_report(
    constants: dict[str, float], *, eps_mbp: float | None = None, beta: float | None = None
) -> dict[str, Any]:
    """Theorem 5.5 from ``constants`` (the keyword arguments of
    :func:`fedpriv.leakage.robustness.input_robustness`) and, when ``eps_mbp`` and ``beta`` are
    both given, Theorem 4.3's confidence; with the list of assumptions the user must justify
    (:data:`ASSUMPTIONS`)."""
    if (eps_mbp is None) != (beta is None):
        missing = "beta" if beta is None else "eps_mbp"
        raise InputError(missing, None, "both Theorem 4.3 inputs (MBP eps and beta), or neither")
    result = input_robustness(**constants)
    pac = None if eps_mbp is None else pac_robust_confidence(eps_mbp, beta).as_dict()
    return {
        "theorem": "Zhang & Chen, arXiv 2403.16591, Theorem 5.5 (input robustness)",
        **result.as_dict(),
        "inputs": dict(constants),
        "assumptions": dict(ASSUMPTIONS),
        "alpha_negative": result.alpha < 0.0,
        "pac": None if pac is None else {"eps_mbp": eps_mbp, "beta": beta, **pac},
    }
