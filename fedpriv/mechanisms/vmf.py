"""``vmf``: the von Mises–Fisher mechanism — a noisy direction of the clipped sum.

privacy-math.md §2 (Algorithm 2 of Biswas et al.): clip each example in ℓ2, sum, normalise
``u = Σ ḡ_i / ‖Σ ḡ_i‖`` (a uniform random direction if the sum is 0), draw ``y ~ VMF(u, κ)``
over the whole flattened gradient (the smallest Rényi divergence, Prop. 3), release ``s·y``
with the public scale ``s`` (``vmf_scale``; default the sensitivity — ``C``, or ``sqrt(Σ C_r²)``
per layer — the largest norm a mean clipped gradient can have when ``B = L``).

One release satisfies ``κ·d₂``-privacy on the sphere, hence ``2κ``-LDP for any secret (§2,
§6); its RDP is Prop. 1 (:func:`fedpriv.accounting.rdp.vmf_rdp`, §3) amplified by Zhu & Wang's
bound, its PLD is built from the exact 1-D law of ``t = xᵀy``
(:func:`fedpriv.accounting.vmf_pld.vmf_pld`), its Bayes capacity is
:func:`fedpriv.leakage.capacity.log_capacity_vmf` (§5) and its trade-off
:func:`fedpriv.leakage.tradeoff.vmf_tradeoff` (§4). None of these depends on ``C``.

Multi-variate (per-layer) VMF, ``vmf_layers = "per-layer"`` (privacy-math.md §12; [1], section
on multi-layer networks, Prop. 2): the clipped sum is split into the model's parameter tensors
(``vmf_layer_dims``: their sizes ``p_r`` in ``model.parameters()`` order, declared so that the
release can be accounted from public parameters alone), and block ``r`` releases
``s_r·y_r``, ``y_r ~ VMF(u_r, κ_r)`` on its own sphere ``S^{p_r−1}`` (``κ_r = kappa`` unless
``vmf_kappas`` lists one per block). Public scales ``s_r = s·C_r/‖(C_1…C_R)‖``: with
``clip_per_layer`` each block is released at its own clip bound ``C_r``; with flat clipping at
``s/√R``; either way the whole release has norm ``s``. Per-layer clipping (Opacus's, which the
paper used) is available but not needed for the guarantee: each block's privacy comes from its
direction alone, whatever the clipping. The RDP is the sum of the blocks' RDPs (Prop. 2) —
never smaller than the one-block VMF's at equal κ (Prop. 3); the log Bayes capacity and the
pure-LDP bound add over blocks (a product channel); see :class:`VMFLayersRelease`.

``vmf_keep_norm = true`` releases ``(‖Σ ḡ_i‖ / L)·y`` instead — the direction's noise with the
true norm of the mean clipped gradient. The norm is released without noise, so neighbouring
batches can be told apart with certainty: this variant has **no formal guarantee**.

References
----------
.. [1] M. Biswas et al., "Comparing privacy notions for protection against reconstruction
   attacks in machine learning", arXiv 2502.04045, Algorithm 2, Propositions 1–3.
.. [2] B. Weggenmann, F. Kerschbaum, "Differential privacy for directional data", CCS 2021.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from fedpriv.accounting.events import NoGuarantee, Release
from fedpriv.accounting.vmf_pld import DEFAULT_DISCRETIZATION as VMF_DISCRETIZATION
from fedpriv.errors import InputError
from fedpriv.mechanisms.base import CLIP_RANGE, MAX_KAPPA, ClippedMechanism, check_clip, param
from fedpriv.special.vmf_sampler import sample_uniform_direction, sample_vmf
from fedpriv.validate import (
    check_choice,
    check_dim,
    check_flag,
    check_positive,
    check_positive_list,
)

if TYPE_CHECKING:
    import torch

    from fedpriv.canaries import CanaryDesign
    from fedpriv.verification import ClientUpdate, Verdict
    from fedpriv.verification.observed import NoiseObservation

__all__ = ["VMF_LAYERS", "VMFLayersRelease", "VMFMechanism", "VMFRelease"]

VMF_LAYERS = ("whole", "per-layer")
"""``vmf_layers``: one VMF over the flattened gradient (default), or one per parameter tensor."""
_PER_LAYER_ONLY = "unset unless vmf_layers = 'per-layer'"


@dataclass(frozen=True)
class VMFRelease(Release):
    """One VMF release with concentration ``κ > 0`` on the unit sphere of ``R^dim``."""

    kappa: float
    dim: int
    mechanism: ClassVar[str] = "vmf"
    parameter_name: ClassVar[str] = "kappa"
    more_noise: ClassVar[int] = -1
    parameter_help: ClassVar[str] = "VMF concentration kappa (needs --dim)"
    pld_discretization: ClassVar[float] = VMF_DISCRETIZATION  # privacy-math.md §3: keep it fine

    def __post_init__(self) -> None:
        check_positive("kappa", self.kappa)
        object.__setattr__(self, "dim", check_dim("dim", self.dim, minimum=2))

    @classmethod
    def calibration_start(cls, dim: int | None) -> VMFRelease:
        """κ = √p/2: the VMF that behaves like a Gaussian with σ ≈ 1 (privacy-math.md §2)."""
        p = check_dim("dim", dim, minimum=2)
        return cls(max(1.0, math.sqrt(p) / 2.0), p)

    def rdp(self, orders: np.ndarray) -> np.ndarray:
        from fedpriv.accounting.rdp import vmf_rdp

        return vmf_rdp(orders, self.kappa, self.dim)

    def pld(self, sample_rate: float, discretization: float | None, *, steps: int = 1) -> Any:
        from fedpriv.accounting.vmf_pld import vmf_pld

        return vmf_pld(self.kappa, self.dim, sample_rate, discretization, steps=steps)

    def grid_need(self, sample_rate: float, steps: int) -> Any:
        from fedpriv.accounting.vmf_pld import vmf_grid_need

        return vmf_grid_need(self.kappa, self.dim, sample_rate, steps)

    def tradeoff(self, alpha: np.ndarray) -> np.ndarray:
        from fedpriv.leakage.tradeoff import vmf_tradeoff

        return vmf_tradeoff(alpha, self.kappa, self.dim)

    def log_bayes_capacity(self, dim: int, radius: float) -> float:
        """Secrets are directions: the capacity depends on neither ``radius`` nor ``C``."""
        from fedpriv.leakage.capacity import log_capacity_vmf

        return log_capacity_vmf(self.dim, self.kappa)

    def pure_ldp_epsilon(self, radius: float) -> float:
        from fedpriv.leakage.bayesian import vmf_mbp_bound

        return vmf_mbp_bound(self.kappa)

    def gaussian_equivalent(self, dim: int) -> float:
        """``√p/(2κ)``: the noise multiplier of the Gaussian it resembles for κ ≪ p (§2)."""
        return math.sqrt(self.dim) / (2.0 * self.kappa)

    def doubled(self) -> VMFRelease:
        """Itself: its pair (antipodal directions) is the worst of any two signals, so a
        neighbour that moves the signal by ``2C`` moves the release no further."""
        return self


@dataclass(frozen=True)
class VMFLayersRelease(Release):
    """One multi-variate VMF release: block ``r`` a VMF with ``κ_r`` on ``S^{p_r−1}``
    (privacy-math.md §12; [1], Prop. 2). Its mechanism is ``vmf`` (a property, so that the
    registry keeps :class:`VMFRelease` as ``vmf``'s release). Its parameter is the common κ
    when every block has the same one (calibrated like :class:`VMFRelease`'s), else None."""

    kappas: tuple[float, ...]
    dims: tuple[int, ...]
    parameter_name: ClassVar[str] = "kappa"
    more_noise: ClassVar[int] = -1
    pld_discretization: ClassVar[float] = VMF_DISCRETIZATION

    def __post_init__(self) -> None:
        kappas = tuple(check_positive("kappas", k, maximum=MAX_KAPPA) for k in self.kappas)
        dims = tuple(check_dim("dims", d, minimum=2) for d in self.dims)
        if not dims or len(kappas) != len(dims):
            raise InputError("kappas", list(self.kappas), f"one per block ({len(dims)})")
        object.__setattr__(self, "kappas", kappas)
        object.__setattr__(self, "dims", dims)

    @property
    def mechanism(self) -> str:  # type: ignore[override]
        """``vmf``, the mechanism that makes the release."""
        return "vmf"

    @classmethod
    def for_layers(cls, dims: Sequence[int]) -> VMFLayersRelease:
        """Calibration start for blocks of sizes ``dims``: a common κ = √p/2 (as
        :meth:`VMFRelease.calibration_start`, ``p = Σ p_r``)."""
        kappa = max(1.0, math.sqrt(sum(dims)) / 2.0)
        return cls((kappa,) * len(dims), tuple(dims))

    @property
    def parameter(self) -> float | None:
        """The common κ of every block, or None when the blocks differ."""
        return self.kappas[0] if len(set(self.kappas)) == 1 else None

    def with_parameter(self, value: float) -> VMFLayersRelease:
        """Every block at concentration ``value``."""
        return VMFLayersRelease((value,) * len(self.dims), self.dims)

    def rdp(self, orders: np.ndarray) -> np.ndarray:
        """``Σ_r τ_α(κ_r, p_r)`` ([1], Prop. 2: independent blocks add their RDP curves)."""
        from fedpriv.accounting.rdp import vmf_rdp

        return sum((vmf_rdp(orders, k, p) for k, p in self.blocks), np.zeros(np.shape(orders)))

    @property
    def blocks(self) -> tuple[tuple[float, int], ...]:
        """``(κ_r, p_r)`` of every block."""
        return tuple(zip(self.kappas, self.dims, strict=True))

    def pld(self, sample_rate: float, discretization: float | None, *, steps: int = 1) -> Any:
        """Unsampled: the blocks' VMF PLDs composed (exact for the product of independent
        blocks). Sampled: the subsampled product, whose joint loss is the blocks' convolved
        (:mod:`fedpriv.accounting.vmf_layers_pld`; Poisson sampling samples the product
        once, so it is not the composition of subsampled blocks)."""
        from fedpriv.accounting.pld_grid import choose_discretization
        from fedpriv.accounting.vmf_pld import vmf_pld

        if sample_rate < 1.0:
            from fedpriv.accounting.vmf_layers_pld import vmf_layers_pld

            return vmf_layers_pld(self.blocks, sample_rate, discretization, steps=steps)
        if discretization is None:
            need = self.grid_need(sample_rate, steps)
            discretization = choose_discretization([need], self.pld_discretization)
        composed = None
        for k, p in self.blocks:
            part = vmf_pld(k, p, 1.0, discretization, steps=steps * len(self.dims))
            composed = part if composed is None else composed.compose(part)
        return composed

    def grid_need(self, sample_rate: float, steps: int) -> Any:
        """Sampled: the subsampled product's laws
        (:func:`~fedpriv.accounting.vmf_layers_pld.vmf_layers_grid_need`). Unsampled: the
        widest block's need composed ``R·steps`` times (pessimistic: every block's window is at
        most the widest one's)."""
        from dataclasses import replace as _replace

        from fedpriv.accounting.vmf_pld import vmf_grid_need

        if sample_rate < 1.0:
            from fedpriv.accounting.vmf_layers_pld import vmf_layers_grid_need

            return vmf_layers_grid_need(self.blocks, sample_rate, steps)
        needs = [vmf_grid_need(k, p, 1.0, steps) for k, p in self.blocks]
        widest = max(needs, key=lambda n: n.single_width)
        return _replace(widest, steps=steps * len(self.dims))

    def tradeoff(self, alpha: np.ndarray) -> np.ndarray:
        raise InputError("mechanism", "vmf (per-layer)", "a mechanism with a closed trade-off "
                         "function (the per-layer VMF's is a tensor product, not computed)")

    def log_bayes_capacity(self, dim: int, radius: float) -> float:
        """``Σ_r log C(κ_r, p_r)``: the capacity of a product channel is the product."""
        from fedpriv.leakage.capacity import log_capacity_vmf

        return float(sum(log_capacity_vmf(p, k) for k, p in self.blocks))

    def pure_ldp_epsilon(self, radius: float) -> float:
        """``Σ_r 2κ_r`` (each block is ``2κ_r``-LDP; pure LDP composes additively)."""
        from fedpriv.leakage.bayesian import vmf_mbp_bound

        return float(sum(vmf_mbp_bound(k) for k in self.kappas))

    def doubled(self) -> VMFLayersRelease:
        """Itself, as :meth:`VMFRelease.doubled` (antipodal directions in every block)."""
        return self


def _check_kappas(key: str, value: Any) -> tuple[float, ...]:
    values = check_positive_list(key, value)
    if max(values) > MAX_KAPPA:
        raise InputError(key, value, f"numbers in (0, {MAX_KAPPA:g}], one per model parameter")
    return values


def _check_layer_dims(key: str, value: Any) -> tuple[int, ...]:
    values = check_positive_list(key, value)
    if not all(v == int(v) and v >= 2 for v in values):
        raise InputError(key, value, "integers >= 2, the model's parameter sizes")
    return tuple(int(v) for v in values)


@dataclass(frozen=True)
class VMFMechanism(ClippedMechanism):
    """Clip in ℓ2, sum, release ``s·y`` with ``y ~ VMF(direction of the sum, κ)``."""

    kappa: float = param(100.0, partial(check_positive, maximum=MAX_KAPPA),
                         f"a number in (0, {MAX_KAPPA:g}]",
                         doc="The VMF's concentration kappa: the larger, the less noise.")
    vmf_scale: float | None = param(
        None, check_clip, f"a number in [{CLIP_RANGE[0]:g}, {CLIP_RANGE[1]:g}] (default: the "
        "clip bound)", optional=True, doc="The norm s of the released vector s*y.",
    )
    vmf_keep_norm: bool = param(
        False, check_flag, "true or false (true releases the norm: no guarantee)"
    )
    vmf_layers: str | None = param(
        None, partial(check_choice, choices=VMF_LAYERS),
        "'whole' (default: one VMF over the whole gradient) or 'per-layer'", optional=True,
        doc="Whether one VMF releases the whole gradient or one VMF each parameter tensor.",
    )
    vmf_layer_dims: tuple[int, ...] | None = param(
        None, _check_layer_dims, "the model's parameter sizes in model.parameters() order "
        "(integers >= 2; required with vmf_layers = 'per-layer')", optional=True,
    )
    vmf_kappas: tuple[float, ...] | None = param(
        None, _check_kappas, f"one kappa in (0, {MAX_KAPPA:g}] per model parameter (default: "
        "kappa for every one; only with vmf_layers = 'per-layer')", optional=True,
    )
    name: ClassVar[str] = "vmf"
    label: ClassVar[str] = "VMF"
    additive: ClassVar[bool] = False  # a direction: canaries cannot be removed from it

    def __post_init__(self) -> None:
        if self.vmf_scale is None:  # default public scale: the clipping bound
            object.__setattr__(self, "vmf_scale", self.sensitivity)
        if self.vmf_layers == "whole":  # the default, kept out of params() (declarations as before)
            object.__setattr__(self, "vmf_layers", None)

    @property
    def per_layer(self) -> bool:
        """Whether each parameter tensor has its own VMF (``vmf_layers = "per-layer"``)."""
        return self.vmf_layers == "per-layer"

    @property
    def block_kappas(self) -> tuple[float, ...]:
        """``κ_r`` of every block (per-layer only)."""
        dims = self.vmf_layer_dims or ()
        return tuple(self.vmf_kappas) if self.vmf_kappas else (self.kappa,) * len(dims)

    @property
    def block_scales(self) -> tuple[float, ...]:
        """Public scales ``s_r = s·C_r/‖(C_1…C_R)‖`` (flat clipping: ``s/√R``); ``‖(s_r)‖ = s``."""
        dims = self.vmf_layer_dims or ()
        bounds = self.clip_bounds if self.clip_per_layer is not None else (1.0,) * len(dims)
        total = math.sqrt(sum(c * c for c in bounds))
        return tuple(float(self.vmf_scale) * c / total for c in bounds)

    def check(self, key_prefix: str) -> None:
        """Per-layer settings: dimensions given, one κ (and one clip bound) per block, no true
        norm; none of them without ``per-layer``."""
        dims = self.vmf_layer_dims
        if not self.per_layer:
            for key in ("vmf_layer_dims", "vmf_kappas"):
                if getattr(self, key) is not None:
                    raise InputError(f"{key_prefix}.{key}", list(getattr(self, key)),
                                     _PER_LAYER_ONLY)
            return
        if dims is None:
            raise InputError(f"{key_prefix}.vmf_layer_dims", None, "the model's parameter "
                             "sizes in model.parameters() order (required with vmf_layers = "
                             "'per-layer')")
        if self.vmf_keep_norm:
            raise InputError(f"{key_prefix}.vmf_keep_norm", True, "false with vmf_layers = "
                             "'per-layer'")
        for key in ("vmf_kappas", "clip_per_layer"):
            value = getattr(self, key)
            if value is not None and len(value) != len(dims):
                raise InputError(f"{key_prefix}.{key}", list(value), f"one per model parameter "
                                 f"({len(dims)}, as vmf_layer_dims)")

    def check_layers(self, layer_sizes: Sequence[int]) -> None:
        """Also: the declared ``vmf_layer_dims`` (and ``vmf_kappas``) fit the model."""
        super().check_layers(layer_sizes)
        if not self.per_layer:
            return
        sizes = [int(n) for n in layer_sizes]
        if self.vmf_kappas is not None and len(self.vmf_kappas) != len(sizes):
            raise InputError("mechanism.vmf_kappas", list(self.vmf_kappas),
                             f"one kappa per model parameter ({len(sizes)} of them)")
        if list(self.vmf_layer_dims or ()) != sizes:
            raise InputError("mechanism.vmf_layer_dims", list(self.vmf_layer_dims or ()),
                             f"the model's parameter sizes {sizes}")

    def _release(
        self, clipped_sum: torch.Tensor, generator: torch.Generator, batch_size: float
    ) -> torch.Tensor:
        if self.per_layer:
            return self._release_layers(clipped_sum, generator)
        norm = float(clipped_sum.norm())
        if not math.isfinite(norm):  # non-finite gradients propagate, as in the other mechanisms
            return clipped_sum.new_full(clipped_sum.shape, math.nan)
        if norm > 0:
            direction = clipped_sum / norm
        else:
            direction = sample_uniform_direction(
                clipped_sum.shape[0], generator, dtype=clipped_sum.dtype, device=clipped_sum.device
            )
        y = sample_vmf(direction, self.kappa, generator)
        return y * (norm / batch_size if self.vmf_keep_norm else self.vmf_scale)

    def _release_layers(self, clipped_sum: torch.Tensor, generator: torch.Generator
                        ) -> torch.Tensor:
        """Block ``r``: ``s_r·y_r``, ``y_r ~ VMF(u_r, κ_r)`` (uniform ``u_r`` for a zero block)."""
        import torch

        if not bool(torch.isfinite(clipped_sum).all()):
            return clipped_sum.new_full(clipped_sum.shape, math.nan)
        blocks = clipped_sum.split(list(self.vmf_layer_dims or ()))
        out = []
        for block, kappa, scale in zip(blocks, self.block_kappas, self.block_scales, strict=True):
            norm = float(block.norm())
            direction = block / norm if norm > 0 else sample_uniform_direction(
                block.shape[0], generator, dtype=block.dtype, device=block.device)
            out.append(sample_vmf(direction, kappa, generator) * scale)
        return torch.cat(out)

    def verify(self, update: ClientUpdate, alpha: float) -> Verdict:
        """The released norm: ``s`` exactly for one step, at most ``k·s`` for ``k``."""
        from fedpriv.verification import verify_vmf, verify_vmf_layers

        if self.per_layer:
            return verify_vmf_layers(update, scales=self.block_scales,
                                     dims=self.vmf_layer_dims or (), alpha=alpha)
        return verify_vmf(update, scale=self.vmf_scale, clip_bound=self.sensitivity,
                          keep_norm=self.vmf_keep_norm, alpha=alpha)

    def observe(self, update: ClientUpdate) -> NoiseObservation | str:
        """Nothing: each step releases a direction of the fixed norm ``s``, and κ shapes only
        where it points, which one release cannot show against an unknown signal."""
        return ("not observable: a VMF release has a fixed norm; κ shapes only its direction, "
                "which one release cannot show against an unknown signal")

    def canary_scores(
        self, design: CanaryDesign, pseudo_gradient: np.ndarray, *, batch_size: float,
        steps: int,
    ) -> np.ndarray | None:
        """The first-order VMF log-likelihood ratios (:func:`fedpriv.canaries.vmf_scores`) of
        the released directions ``−Δ/η = s·Σ_t y_t`` (no divisor). Runs insert no canaries
        into VMF clients (not ``additive``); the library scores VMF releases all the same."""
        from fedpriv.canaries import vmf_scores

        if self.per_layer:  # per-block scores not derived: not scored
            return None
        return vmf_scores(design, pseudo_gradient, kappa=self.kappa, scale=self.vmf_scale)

    def pac_accuracy(self, beta: float, dim: int, batch_size: float) -> float | None:
        """``2s·sin(θ_{1−β}/2)`` between ``s·y`` and ``s·u``
        (:func:`fedpriv.leakage.robustness.vmf_accuracy`); None with ``vmf_keep_norm``, whose
        scale is the data's own norm, so no public radius exists."""
        from fedpriv.leakage.robustness import vmf_accuracy

        if self.vmf_keep_norm:
            return None
        if self.per_layer:  # union bound: every block within its (1 − β/R)-quantile
            r = len(self.block_kappas)
            parts = [vmf_accuracy(beta / r, p, k, s) for p, k, s in
                     zip(self.vmf_layer_dims or (), self.block_kappas, self.block_scales,
                         strict=True)]
            return math.sqrt(sum(a * a for a in parts))
        return vmf_accuracy(beta, dim, self.kappa, self.vmf_scale)

    def release(self, dim: int) -> Release:
        if self.vmf_keep_norm:
            return NoGuarantee(self.name)
        if self.per_layer:
            dims = tuple(self.vmf_layer_dims or ())
            if sum(dims) != dim:  # a declaration that does not fit the model (caught before
                # training by check_layers; from a peer, the failing verification says so)
                return NoGuarantee(self.name)
            return VMFLayersRelease(self.block_kappas, dims)
        return VMFRelease(self.kappa, dim)
