"""Attacks by name, and the single entry point :func:`run_attack`.

An attack is one module of :mod:`attacks.inversion` defining a function decorated with
:func:`attack`, which names it and declares its options with their checkers
(:mod:`fedpriv.validate`); called with those options, the function returns the configured
:class:`Attack` (for DLG, iDLG and IGA a :class:`attacks.inversion.matching.GradientMatcher`).
The registry imports every module of that package once, so adding an attack is adding one file.
"""

from __future__ import annotations

import importlib
import pkgutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

import torch

from attacks.result import AttackResult, Trial
from attacks.view import ServerView
from fedpriv.audit.config import MAX_ITERATIONS, MAX_RESTARTS
from fedpriv.devices import resolve_device
from fedpriv.errors import InputError
from fedpriv.validate import Check, check_dim, check_int_range

__all__ = ["Attack", "AttackSpec", "attack", "attack_names", "check_attack",
           "check_attack_names", "run_attack"]


class Attack(Protocol):
    """An attack configured with its options, ready to run on a view."""

    def run(
        self,
        view: ServerView,
        *,
        iterations: int,
        restarts: int,
        generator: torch.Generator,
        num_images: int,
        device: torch.device,
    ) -> Trial:
        """The kept restart; the arguments are those of :func:`run_attack`, resolved."""
        ...


@dataclass(frozen=True)
class AttackSpec:
    """A registered attack: the function that configures it and the checker of each option."""

    name: str
    configure: Callable[..., Attack]
    options: dict[str, Check]


_REGISTERED: dict[str, AttackSpec] = {}
_ATTACK_PACKAGE = "attacks.inversion"


def attack(
    name: str, **options: Check
) -> Callable[[Callable[..., Attack]], Callable[..., Attack]]:
    """Register the decorated function (options -> :class:`Attack`) as the attack ``name``
    with these option checkers."""

    def register(configure: Callable[..., Attack]) -> Callable[..., Attack]:
        _REGISTERED[name] = AttackSpec(name, configure, options)
        return configure

    return register


@cache
def _registry() -> dict[str, AttackSpec]:
    package = importlib.import_module(_ATTACK_PACKAGE)
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{_ATTACK_PACKAGE}.{module.name}")
    return dict(sorted(_REGISTERED.items()))


def attack_names() -> list[str]:
    """Every registered attack."""
    return list(_registry())


def check_attack_names(names: list[str], key: str) -> None:
    """Raise :class:`InputError` naming ``key`` unless every name is a registered attack."""
    known = attack_names()
    for name in names:
        if name not in known:
            raise InputError(key, name, f"attack names from {known}")


def check_attack(
    name: str,
    iterations: int,
    restarts: int,
    seed: int,
    num_images: int | None,
    options: dict[str, Any],
) -> None:
    """Raise :class:`InputError` (key ``attack.<field>``) for any bad attack setting."""
    registry = _registry()
    if name not in registry:
        raise InputError("attack.name", name, f"one of {list(registry)}")
    check_int_range("attack.iterations", iterations, 1, MAX_ITERATIONS)
    check_int_range("attack.restarts", restarts, 1, MAX_RESTARTS)
    check_int_range("attack.seed", seed, 0, 2**63 - 1)
    if num_images is not None:
        check_dim("attack.num_images", num_images)
    allowed = registry[name].options
    for key, value in options.items():
        if key not in allowed:
            raise InputError(f"attack.{key}", value, f"an option of {name}: {list(allowed)}")
        allowed[key](f"attack.{key}", value)


@contextmanager
def _single_thread() -> Iterator[None]:
    """One torch thread for the attack (the runner parallelises across attacks)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def run_attack(
    name: str,
    view: ServerView,
    *,
    iterations: int,
    restarts: int = 1,
    seed: int = 0,
    num_images: int | None = None,
    device: str = "cpu",
    **options: Any,
) -> AttackResult:
    """Run the attack ``name`` on the server's view of one update.

    Parameters
    ----------
    name
        A registered attack (:func:`attack_names`).
    view
        What the server saw; the attack gets nothing else (no ground truth).
    iterations
        Optimiser iterations per restart.
    restarts
        Independent random starts; the one with the least matching loss is kept.
    seed
        Seed of the attack's ``torch.Generator`` (starting images, soft labels, dummies).
    num_images
        Number of images to reconstruct; default round(L) from the view.
    device
        ``"cpu"``, ``"cuda"`` or ``"auto"`` (:func:`fedpriv.devices.resolve_device`): where the
        optimisation runs. Random starts are drawn on the CPU, so they do not depend on it.
    **options
        Attack-specific settings (``lr``, ``tv_weight``, ``history_size``, ``line_search``).

    Raises
    ------
    InputError
        Unknown attack, option or bad value (key ``attack.<name>``), before any work.
    """
    check_attack(name, iterations, restarts, seed, num_images, options)
    where = resolve_device(device, "attack.device")
    n = view.default_num_images if num_images is None else num_images
    generator = torch.Generator().manual_seed(seed)
    configured = _registry()[name].configure(**options)
    start = time.perf_counter()
    with _single_thread():
        trial = configured.run(
            view,
            iterations=iterations,
            restarts=restarts,
            generator=generator,
            num_images=n,
            device=where,
        )
    return AttackResult(
        attack=name,
        reconstructions=trial.reconstructions,
        labels=trial.labels,
        start=trial.start,
        loss=trial.loss,
        iterations=iterations,
        restarts=restarts,
        seed=seed,
        seconds=time.perf_counter() - start,
        pseudo_gradient=view.pseudo_gradient,
    )
