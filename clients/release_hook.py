"""A seam between fedpriv's ClientApp and a mod that changes how it releases (a test double).

:func:`clients.client_app.train` hands the mechanism it trains with through :func:`releasing`
before local training; a client mod that wants to change what each step releases — only the
adversarial clients of :mod:`clients.adversaries` do — sets :data:`RELEASE_HOOK` around its
``call_next``. Honest clients find no hook and train with the mechanism as built. A context
variable, not a global: the hook is set and read in the thread (or Ray actor call) that serves
the one message.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from fedpriv.mechanisms import Mechanism

__all__ = ["RELEASE_HOOK", "releasing"]

RELEASE_HOOK: ContextVar[Callable[[Mechanism], Any] | None] = ContextVar("release_hook",
                                                                        default=None)
"""Mechanism → the object whose ``privatize`` local training calls (None: the mechanism)."""


def releasing(mechanism: Mechanism) -> Any:
    """What local training privatises with: ``mechanism``, or the hook's stand-in for it."""
    hook = RELEASE_HOOK.get()
    return mechanism if hook is None else hook(mechanism)
