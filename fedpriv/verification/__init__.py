"""Declared versus verified privacy: the server's statistical checks of an update against the
mechanism the client declared (privacy-math.md §9).

Pure functions of numpy arrays and plain numbers; no Flower and no torch. The server's reply
check calls :func:`verify_update` with the declared mechanism's ``verify`` method, which calls
its ``verify_*`` here on a :class:`ClientUpdate`; the report adjusts the per-round p-values
with :func:`holm`.

Modules: :mod:`~fedpriv.verification.verdict` (the result type), :mod:`~.declaration`
(plausibility), :mod:`~.records` (the law of the records used), :mod:`~.update` (the summed
release, optimisers), :mod:`~.laws` (noise-norm laws and Chernoff bounds), :mod:`~.sandwich`
(p-values of clipped-signal norm tests), :mod:`~.gaussian`, :mod:`~.laplace`, :mod:`~.vmf`,
:mod:`~.clip` (one mechanism each), :mod:`~.roundoff` (float32 tolerances), :mod:`~.power`,
:mod:`~.multiple` (many client-rounds), :mod:`~.client_round` (:func:`verify_update`),
:mod:`~.replay` (replays and fresh noise across rounds), :mod:`~.properties` (per-property
verdicts and the ``verified`` label).
"""

from fedpriv.verification.client_round import Verifier, verify_update
from fedpriv.verification.clip import clip_norm_test, verify_clip, verify_none
from fedpriv.verification.declaration import (
    Declaration,
    check_batch_sizes,
    check_declaration,
)
from fedpriv.verification.gaussian import (
    gaussian_light_tail_test,
    gaussian_norm_test,
    gaussian_shape_test,
    verify_gaussian,
)
from fedpriv.verification.laplace import laplace_norm_test, laplace_shape_test, verify_laplace
from fedpriv.verification.multiple import (
    ADJUSTMENTS,
    benjamini_hochberg,
    bonferroni,
    flag_inconsistent,
    holm,
)
from fedpriv.verification.power import (
    gaussian_detectable_fraction,
    gaussian_detectable_records,
    gaussian_norm_power,
    gaussian_norm_thresholds,
    gaussian_signal_power,
)
from fedpriv.verification.properties import (
    PROPERTIES,
    PropertyVerdict,
    label_reasons,
    property_verdicts,
)
from fedpriv.verification.records import RecordCount, record_count
from fedpriv.verification.replay import UpdateSketches
from fedpriv.verification.roundoff import FLOAT32_UNIT_ROUNDOFF, norm_tolerance, roundoff_bound
from fedpriv.verification.update import ClientUpdate, client_update
from fedpriv.verification.verdict import (
    DEFAULT_ALPHA,
    Status,
    Verdict,
    combine_verdicts,
    unverifiable,
    with_preconditions,
)
from fedpriv.verification.vmf import verify_vmf, verify_vmf_layers, vmf_norm_test

__all__ = [
    "ADJUSTMENTS",
    "DEFAULT_ALPHA",
    "FLOAT32_UNIT_ROUNDOFF",
    "PROPERTIES",
    "ClientUpdate",
    "Declaration",
    "PropertyVerdict",
    "RecordCount",
    "Status",
    "UpdateSketches",
    "Verdict",
    "Verifier",
    "benjamini_hochberg",
    "bonferroni",
    "check_batch_sizes",
    "check_declaration",
    "client_update",
    "clip_norm_test",
    "combine_verdicts",
    "flag_inconsistent",
    "gaussian_detectable_fraction",
    "gaussian_detectable_records",
    "gaussian_light_tail_test",
    "gaussian_norm_power",
    "gaussian_norm_test",
    "gaussian_norm_thresholds",
    "gaussian_shape_test",
    "gaussian_signal_power",
    "holm",
    "label_reasons",
    "laplace_norm_test",
    "laplace_shape_test",
    "norm_tolerance",
    "property_verdicts",
    "record_count",
    "roundoff_bound",
    "unverifiable",
    "verify_clip",
    "verify_gaussian",
    "verify_laplace",
    "verify_none",
    "verify_update",
    "verify_vmf",
    "verify_vmf_layers",
    "vmf_norm_test",
    "with_preconditions",
]
