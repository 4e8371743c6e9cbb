"""Attacks by name, and the single entry point :func:`run_attack`.

An attack is one module of :mod:`attacks.inversion` defining a function decorated with
:func:`attack`, which names it and declares its options with their checkers
(:mod:`fedpriv.validate`); called with those options, the function returns the configured
:class:`Attack` (for DLG, iDLG and IGA a :class:`attacks.inversion.matching.GradientMatcher`).
The registry imports every module of that package once, so adding an attack is adding one file.

``strongest`` (:data:`STRONGEST`) is not an attack but a choice among them: it runs every
registered attack applicable to the view (and IGA from the analytic attack's images where that
applies; the analytic attack first, and no member after a result at or below
:data:`EXACT_RESIDUAL`, which nothing can beat) and keeps the result of least float64 matching
residual
(:meth:`attacks.inversion.objective.InversionProblem.residual`: the release against the
(pseudo-)gradient of the result's images and labels, clip factors at θ under a declared
bound). The residual is the attacks' own criterion and needs no ground truth.
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

from attacks.result import AttackResult, Trial, rank_key
from attacks.view import ServerView
from fedpriv.audit.config import MAX_ITERATIONS, MAX_RESTARTS
from fedpriv.devices import resolve_device
from fedpriv.errors import InputError
from fedpriv.validate import Check, check_dim, check_int_range

__all__ = ["STRONGEST", "Attack", "AttackSpec", "attack", "attack_names", "attack_options",
           "check_attack", "check_attack_names", "run_attack"]

#: The name that runs every applicable attack and keeps the least residual (module docstring).
STRONGEST = "strongest"
#: The analytic attack (:mod:`attacks.inversion.analytic`), also an initialisation of others.
ANALYTIC = "analytic"
#: A float64 matching residual at or below which a result counts as exact, and ``strongest``
#: runs no further member: at the truth the residual is 1e-13 (batch 1) to 6e-12 (batch 8) on
#: the paper MLP, the analytic attack's there the same, and the least of any inexact result
#: measured 2.7e-7 (batch 32, IGA from the analytic start).
EXACT_RESIDUAL = 1e-9


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
    applicable: Callable[[ServerView], bool] | None = None  # None: every view


_REGISTERED: dict[str, AttackSpec] = {}
_ATTACK_PACKAGE = "attacks.inversion"


def attack(
    name: str, applicable: Callable[[ServerView], bool] | None = None, **options: Check
) -> Callable[[Callable[..., Attack]], Callable[..., Attack]]:
    """Register the decorated function (options -> :class:`Attack`) as the attack ``name``
    with these option checkers; ``applicable(view)`` says which views it can attack (all
    when None)."""

    def register(configure: Callable[..., Attack]) -> Callable[..., Attack]:
        _REGISTERED[name] = AttackSpec(name, configure, options, applicable)
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


def attack_options(name: str) -> set[str]:
    """The options the attack ``name`` (or :data:`STRONGEST`: any member's) takes."""
    if name == STRONGEST:
        return set(_strongest_options())
    return set(_registry()[name].options)


def check_attack_names(names: list[str], key: str) -> None:
    """Raise :class:`InputError` naming ``key`` unless every name is a registered attack or
    :data:`STRONGEST`."""
    known = [*attack_names(), STRONGEST]
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
    if name not in registry and name != STRONGEST:
        raise InputError("attack.name", name, f"one of {[*registry, STRONGEST]}")
    check_int_range("attack.iterations", iterations, 1, MAX_ITERATIONS)
    check_int_range("attack.restarts", restarts, 1, MAX_RESTARTS)
    check_int_range("attack.seed", seed, 0, 2**63 - 1)
    if num_images is not None:
        check_dim("attack.num_images", num_images)
    allowed = _strongest_options() if name == STRONGEST else registry[name].options
    for key, value in options.items():
        if key not in allowed:
            raise InputError(f"attack.{key}", value, f"an option of {name}: {list(allowed)}")
        allowed[key](f"attack.{key}", value)


def _strongest_options() -> dict[str, Check]:
    """The options ``strongest`` takes: any member's (each member gets those it knows)."""
    merged: dict[str, Check] = {}
    for spec in _registry().values():
        merged.update(spec.options)
    return merged


def _members(view: ServerView, options: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The (attack, options) pairs ``strongest`` runs on ``view``: every applicable attack
    with the options it takes, and each attack with an ``init`` option once more from the
    analytic attack's images where that attack applies."""
    registry = _registry()
    usable = [spec for spec in registry.values()
              if spec.applicable is None or spec.applicable(view)]
    seeded = any(spec.name == ANALYTIC for spec in usable) and "init" not in options
    members = []
    for spec in sorted(usable, key=lambda spec: spec.name != ANALYTIC):  # analytic first
        own = {k: v for k, v in options.items() if k in spec.options}
        members.append((spec.name, own))
        if seeded and "init" in spec.options:
            members.append((spec.name, {**own, "init": ANALYTIC}))
    return members


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
        A registered attack (:func:`attack_names`), or :data:`STRONGEST`.
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
        Unknown attack, option or bad value (key ``attack.<name>``), or an attack that does
        not apply to the view's model (key ``attack.name``), before any work.
    """
    check_attack(name, iterations, restarts, seed, num_images, options)
    spec = _registry().get(name)
    if spec is not None and spec.applicable is not None and not spec.applicable(view):
        raise InputError("attack.name", name, f"an attack applicable to {view.model_name} "
                         f"(or {STRONGEST!r}, which runs only those)")
    where = resolve_device(device, "attack.device")
    n = view.default_num_images if num_images is None else num_images
    start = time.perf_counter()
    with _single_thread():
        if name == STRONGEST:
            trial, chosen = _strongest(view, iterations, restarts, seed, n, where, options)
        else:
            trial, chosen = _run_one(name, view, iterations, restarts, seed, n, where,
                                     options), {"options": dict(options)}
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
        settings=chosen,
    )


def _run_one(name: str, view: ServerView, iterations: int, restarts: int, seed: int, n: int,
             where: torch.device, options: dict[str, Any]) -> Trial:
    configured = _registry()[name].configure(**options)
    return configured.run(view, iterations=iterations, restarts=restarts,
                          generator=torch.Generator().manual_seed(seed), num_images=n,
                          device=where)


def _strongest(view: ServerView, iterations: int, restarts: int, seed: int, n: int,
               where: torch.device, options: dict[str, Any]) -> tuple[Trial, dict[str, Any]]:
    """Every member's trial ranked by the float64 residual; the least kept, with what ran."""
    from attacks.inversion.objective import InversionProblem

    problem = InversionProblem(view, where)
    best: tuple[float, Trial] | None = None
    ran: list[dict[str, Any]] = []
    chosen = 0
    for member, own in _members(view, options):
        if best is not None and best[0] <= EXACT_RESIDUAL:
            ran.append({"attack": member, "options": own, "residual": None,
                        "skipped": f"a kept residual {best[0]:.1e} <= {EXACT_RESIDUAL:g} is "
                                   "exact: nothing can beat it"})
            continue
        trial = _run_one(member, view, iterations, restarts, seed, n, where, own)
        residual = problem.residual(trial.reconstructions, trial.labels)
        ran.append({"attack": member, "options": own, "residual": residual})
        if best is None or rank_key(residual) < rank_key(best[0]):
            best = (residual, trial)
            chosen = len(ran) - 1
    assert best is not None
    return best[1], {"chosen": ran[chosen], "members": ran,
                     "criterion": "float64 matching residual (1 - cosine), no ground truth"}
