"""Attacks by name, and the single entry point :func:`run_attack`."""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from attacks.dlg import dlg
from attacks.idlg import idlg
from attacks.iga import iga
from attacks.result import AttackResult, Trial
from attacks.view import ServerView
from fedpriv.errors import InputError

__all__ = ["ATTACKS", "check_attack", "run_attack"]

ATTACKS: dict[str, Callable[..., Trial]] = {"dlg": dlg, "idlg": idlg, "iga": iga}

_COMMON = {"view", "iterations", "restarts", "generator", "num_images"}
_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "lr": (lambda v: _real(v) and v > 0, "a finite number > 0"),
    "tv_weight": (lambda v: _real(v) and v >= 0, "a finite number >= 0"),
    "history_size": (lambda v: _count(v), "an integer >= 1"),
    "line_search": (lambda v: v in (None, "strong_wolfe"), "None or 'strong_wolfe'"),
}


def _real(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def check_attack(
    name: str,
    iterations: int,
    restarts: int,
    seed: int,
    num_images: int | None,
    options: dict[str, Any],
) -> None:
    """Raise :class:`InputError` (key ``attack.<field>``) for any bad attack setting."""
    if name not in ATTACKS:
        raise InputError("attack.name", name, f"one of {sorted(ATTACKS)}")
    for key, value in (("iterations", iterations), ("restarts", restarts)):
        if not _count(value):
            raise InputError(f"attack.{key}", value, "an integer >= 1")
    if not (isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0):
        raise InputError("attack.seed", seed, "an integer >= 0")
    if num_images is not None and not _count(num_images):
        raise InputError("attack.num_images", num_images, "an integer >= 1")
    allowed = [p for p in inspect.signature(ATTACKS[name]).parameters if p not in _COMMON]
    for key, value in options.items():
        if key not in allowed:
            raise InputError(f"attack.{key}", value, f"an option of {name}: {allowed}")
        check, what = _RULES[key]
        if not check(value):
            raise InputError(f"attack.{key}", value, what)


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
    **options: Any,
) -> AttackResult:
    """Run the attack ``name`` on the server's view of one update.

    Parameters
    ----------
    name
        ``"dlg"``, ``"idlg"`` or ``"iga"``.
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
    **options
        Attack-specific settings (``lr``, ``tv_weight``, ``history_size``, ``line_search``).

    Raises
    ------
    InputError
        Unknown attack, option or bad value (key ``attack.<name>``), before any work.
    """
    check_attack(name, iterations, restarts, seed, num_images, options)
    n = view.default_num_images if num_images is None else num_images
    generator = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    with _single_thread():
        trial = ATTACKS[name](
            view,
            iterations=iterations,
            restarts=restarts,
            generator=generator,
            num_images=n,
            **options,
        )
    return AttackResult(
        attack=name,
        reconstructions=trial.reconstructions,
        labels=trial.labels,
        prior=trial.prior,
        loss=trial.loss,
        iterations=iterations,
        restarts=restarts,
        seed=seed,
        seconds=time.perf_counter() - start,
        pseudo_gradient=view.pseudo_gradient,
    )
