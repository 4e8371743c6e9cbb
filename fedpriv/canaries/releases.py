"""Which formal ε a canary lower bound is to be compared with (privacy-math.md §10).

A canary is a record of the client's data set whose inclusion pattern is set by the audit:

* every-step insertion (``rate = 1``): an in-canary is in every batch, so its releases are the
  client's releases *without* subsampling — the same ledger with sampling rate 1. Its ε is
  larger than a real record's; the real records' ε is unchanged (to them the canary sum is a
  constant shift of the released sum, independent of their data).
* Poisson insertion at the records' rate ``q`` (``rate = q``, the client's private
  generator): the canary is accounted exactly like a real record — the same ledger.

A lower bound from canaries is a lower bound on the *canary's* ε, so a bound above the
canary's formal ε falsifies the declaration, while a bound between the records' ε and the
canary's ε (possible with every-step canaries) falsifies nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from fedpriv.accounting.events import ReleaseEvent
from fedpriv.errors import InputError
from fedpriv.validate import check_rate

__all__ = ["canary_events"]


def canary_events(events: Sequence[ReleaseEvent], rate: float = 1.0) -> tuple[ReleaseEvent, ...]:
    """The ledger of one canary present in ``events`` with inclusion rate ``rate``.

    ``rate = 1`` replaces every sampling rate by 1 (every-step insertion); a rate below 1 must
    be the records' own rate (Poisson insertion) and leaves the ledger as it is.
    """
    q = check_rate("canaries.rate", rate)
    if q == 1.0:
        return tuple(dataclasses.replace(e, sample_rate=1.0) for e in events)
    for event in events:
        if event.sample_rate != q:
            raise InputError("canaries.rate", rate,
                             f"1, or the records' sampling rate {event.sample_rate}")
    return tuple(events)
