"""``[audit]`` and ``[audit.canaries]``: what the honest-but-curious server logs, tallies,
attacks and estimates (docs/canaries.md for the canaries' ε lower bound)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fedpriv.errors import InputError
from fedpriv.schema import MAX_SEED, bounded_count, one_of, rule, seed_ok

__all__ = [
    "AuditConfig",
    "CANARY_METHODS",
    "CanaryConfig",
    "DEFAULT_ACCOUNTANT",
    "DEFAULT_DELTA",
    "GAUSSIAN_ONLY_METHODS",
    "MAX_ITERATIONS",
    "MAX_RESTARTS",
    "MAX_ROUND_SECONDS",
    "MAX_STEP_RELEASE_BYTES",
    "RELEASE_MODES",
    "ROTATE",
    "check_release_size",
]

#: ``audit.clients``: one client per attacked round, taken in turn (:meth:`strategies.
#: attack_schedule.AttackPlan.scheduled`): each client's turn comes once every
#: ``num_clients`` attacked rounds (one absent in its turn is not attacked that cycle), and a
#: round's attacks cost one client-round's.
ROTATE = "rotate"
#: The estimators of an ε lower bound (``fedpriv.canaries.ESTIMATORS``; docs/canaries.md).
CANARY_METHODS = ("one-run", "clopper-pearson", "gdp-thresholds", "gdp-fit")
#: Estimators that assume a Gaussian privacy profile: for Gaussian releases only.
GAUSSIAN_ONLY_METHODS = ("gdp-thresholds", "gdp-fit")
#: Most optimiser iterations per restart of an attack (``audit.iterations``, ``fedpriv audit
#: --iterations``, ``sweep.attack_iterations``, the attack registry's own check): about an hour
#: of DLG on the paper MLP; docs/trust.md §5.
MAX_ITERATIONS = 1_000_000
#: The largest round attack budget (``audit.round_seconds``): a week.
MAX_ROUND_SECONDS = 7 * 24 * 3600.0
#: Most restarts of an attack (``audit.restarts``, the attack registry's own check).
MAX_RESTARTS = 1_000
#: The accountant of a run (``audit.accountant``) and of ``fedpriv account`` unless told
#: otherwise: one default, so a noise calibrated by the command gives the run's ε. ``tightest``
#: reports the least of every valid route (PLD, RDP and its conversions), each an upper bound
#: (privacy-math.md §15).
DEFAULT_ACCOUNTANT = "tightest"
#: δ of a run's ε (``audit.delta``) and of ``fedpriv account`` unless told otherwise.
DEFAULT_DELTA = 1e-5
#: What a client sends of its round (``audit.release``): ``update``, its new parameters; or
#: ``steps``, beside them every local step's release, which the server recomposes and tests one
#: step at a time (fedpriv/verification/steps.py; docs/trust.md §2, docs/protocol.md).
RELEASE_MODES = ("update", "steps")
#: Most bytes of step releases one reply may carry in steps mode (``local_steps × p`` float32
#: values): 256 MiB, half of Flower's default gRPC message limit (512 MiB), so the update and
#: the report still fit beside them. Checked before the run (:func:`check_release_size`) and
#: for every reply before its releases are read (``strategies/step_releases.py``).
MAX_STEP_RELEASE_BYTES = 256 * 2**20


@dataclass(frozen=True)
class CanaryConfig:
    """``[audit.canaries]``: gradient canaries inserted by every client and scored by the
    server, for a lower bound on ε beside the accountant's (docs/canaries.md)."""

    enabled: bool = rule("true or false", default=False,
                         doc="Whether every client inserts gradient canaries.")
    count: int = rule(*bounded_count(2, 1_000_000, " (at most the model's parameter count for "
                                          "coordinate canaries)"), default=1000,
                      doc="Canaries per client-round.")
    kind: str = rule(*one_of("coordinate", "random"), default="coordinate",
                     doc="Canaries along coordinates, or random directions.")
    confidence: float = rule("a number in (0, 1)", lambda v: 0 < v < 1, default=0.95,
                             doc="The confidence of the canaries' epsilon lower bound.")
    method: str = rule(*one_of(*CANARY_METHODS), default="one-run",
                       doc="The estimator of the epsilon lower bound (docs/canaries.md).")


@dataclass(frozen=True)
class AuditConfig:
    """``[audit]``: what the honest-but-curious server logs, tallies and attacks."""

    enabled: bool = rule("true or false", default=True,
                         doc="Whether the server audits: stores, verifies and tallies every "
                             "reply.")
    delta: float = rule("a number in (0, 1)", lambda v: 0 < v < 1, default=DEFAULT_DELTA,
                        doc="The delta of every epsilon the run reports.")
    accountant: str = rule(*one_of("tightest", "rdp", "pld"), default=DEFAULT_ACCOUNTANT,
                           doc="The privacy accountant; tightest is the least epsilon of every "
                               "valid route.")
    neighbouring: str = rule(*one_of("add-remove", "replace-one"), default="add-remove",
                             doc="The neighbouring relation of record-level epsilon.")
    threat_model: str = rule(*one_of("record", "batch"), default="record",
                             doc="The secret the capacity and MBP bounds protect: one record or "
                                 "one batch.")
    ground_truth: bool = rule(
        "true or false: the simulation-only oracle that ships each batch's record ids to the "
        "auditor for scoring", default=False,
    )
    verify_alpha: float = rule(
        "a number in (0, 0.5]: the false-alarm rate of each test of an update against its "
        "declared mechanism", lambda v: 0 < v <= 0.5, default=1e-6,
    )
    pac_beta: float = rule(
        "a number in (0, 1): the failure probability beta of the PAC accuracy of a release "
        "(Zhang & Chen, Thm 4.3)", lambda v: 0 < v < 1, default=0.01,
    )
    attacks: list[str] = rule(
        "a list of attack names (checked against the attack registry before the run starts)",
        lambda v: len(set(v)) == len(v) and all(v), default_factory=lambda: ["strongest"],
        doc="The gradient-inversion attacks the server runs on updates ([] runs none); "
            "\"strongest\" runs every applicable attack and keeps the least float64 matching "
            "residual.",
    )
    every: int = rule(*bounded_count(1, 1_000_000), default=1,
                      doc="Attack every this many rounds.")
    clients: str | int | list[int] = rule(
        f'"{ROTATE}", "all", a number of clients >= 1, or a list of client ids',
        lambda v: v in (ROTATE, "all") if isinstance(v, str)
        else (v >= 1 if isinstance(v, int) else True),
        default=ROTATE,
        doc=f'Whose updates are attacked: "{ROTATE}", one client per attacked round in turn '
            '(round r starts at client (r - 1) // every mod num_clients and takes the first '
            'that replied at or after it); "all"; the first n clients; or the listed ids.',
    )
    round_seconds: float = rule(
        f"a number of seconds in [0, {MAX_ROUND_SECONDS:g}] (0 sets no limit)",
        lambda v: 0 <= v <= MAX_ROUND_SECONDS, default=120.0,
        doc="The round's attack budget: the wall-clock seconds, tuning included, after which "
            "no further client's attack of the round starts (the first client's always run, to "
            "the end); the clients left unattacked are logged and listed in report.json "
            "(attacks_skipped). 0 sets no limit.",
    )
    iterations: int = rule(*bounded_count(1, MAX_ITERATIONS), default=2000,
                           doc="Optimiser iterations per restart of an attack.")
    restarts: int = rule(*bounded_count(1, MAX_RESTARTS), default=1,
                         doc="Restarts of an attack (the best is kept).")
    tv_weight: float = rule(
        "a number >= 0 (IGA's total-variation weight)", lambda v: v >= 0, default=1e-4,
        doc="IGA's total-variation weight; 1e-4 measured best on the built-in digits (the "
            "reference 0.2 outweighs the cosine term: docs/leakage.md).",
    )
    tune: str = rule(
        *one_of("public", "off"), default="public",
        doc="How attack settings are chosen: tuned on a shadow client built from the server's "
            "public evaluation split with the round's model and the client's declared settings "
            "(never the attacked client's records), or off: the fixed settings.",
    )
    tune_scope: str = rule(
        *one_of("round", "run"), default="round",
        doc="How often the public tuning runs: in every attacked round from that round's model "
            "(θ moves the choice: TV 1e-4 at a fresh model, 1e-2 after 100 steps; "
            "benchmarks/attack_speed.py), or once per attack and declared setting in the run, "
            "at the first round it is attacked (cheaper, the first round's choice kept).",
    )
    early_stop: float = rule(
        "a number in [0, 0.5] (0 disables the early stop)", lambda v: 0 <= v <= 0.5,
        default=0.01,
        doc="Optimisation attacks stop when their float64 matching residual falls by less than "
            "this share of itself in 100 iterations (IGA first brings its next learning-rate "
            "decay forward); 0 runs every iteration.",
    )
    seed: int = rule(f"an integer in [0, {MAX_SEED}]", seed_ok, default=0,
                     doc="The attacks' seed.")
    executor: str = rule(*one_of("inline", "ray"), default="inline",
                         doc="Where attacks run: in the server's process, or as Ray tasks.")
    bayes_runs: int = rule(*bounded_count(0, 1_000, " (0 disables the estimate)"), default=0,
                           doc="Attack runs behind the Bayesian privacy estimate.")
    bayes_threshold: float = rule("a number in (0, 1]", lambda v: 0 < v <= 1, default=0.5,
                                  doc="The SSIM above which a reconstruction counts as a "
                                      "success in the Bayesian estimate.")
    bayes_smoothing: float = rule("a number >= 0", lambda v: v >= 0, default=1.0,
                                  doc="The Bayesian estimate's additive smoothing.")
    bayes_distractors: int = rule(*bounded_count(0, 100_000), default=15,
                                  doc="Distractor records per Bayesian run.")
    game_trials: int = rule(*bounded_count(0, 1_000_000, " (0 disables the identification "
                                                        "game)"), default=1000,
                            doc="Trials of the identification game.")
    game_candidates: int = rule(*bounded_count(2, 100_000), default=16,
                                doc="Candidates the attacker chooses among in each trial.")
    game_confidence: float = rule("a number in (0, 1)", lambda v: 0 < v < 1, default=0.95,
                                  doc="The confidence of the game's interval.")
    game_alpha: float = rule(
        "a number in (0, 0.5]: the family-wise false-alarm rate of the identification game's "
        "flags over the run's client-rounds (Holm)", lambda v: 0 < v <= 0.5, default=0.05,
    )
    canaries: CanaryConfig = field(default_factory=CanaryConfig)
    undeclared: str = rule(
        *one_of("aggregate", "refuse"), default="aggregate",
        doc="What becomes of a reply without fedpriv's report (a stock Flower client; "
            "docs/protocol.md).",
    )
    store_updates: str = rule(*one_of("all", "attacked", "none"), default="all",
                              doc="Which accepted updates the store keeps.")
    update_dtype: str = rule(*one_of("float32", "float16"), default="float32",
                             doc="The precision in which the store keeps updates.")
    release: str = rule(
        *one_of(*RELEASE_MODES), default="update",
        doc="What a client sends: its update, or beside it every local step's release "
            "(docs/trust.md §2).",
    )


def check_release_size(audit: AuditConfig, local_steps: int, dim: int) -> None:
    """In steps mode, a reply carries ``local_steps × dim`` float32 releases: at most
    :data:`MAX_STEP_RELEASE_BYTES`.

    Raises
    ------
    InputError
        Key ``audit.release``, with the estimated bytes per reply.
    """
    if audit.release != "steps":
        return
    size = 4 * local_steps * dim
    if size > MAX_STEP_RELEASE_BYTES:
        raise InputError("audit.release", "steps", f"'update': steps mode would send "
                         f"{local_steps} steps x {dim} parameters x 4 bytes = {size / 2**20:.0f} "
                         f"MiB per reply, over the limit of {MAX_STEP_RELEASE_BYTES // 2**20} MiB "
                         "(fewer train.local_steps or a smaller model)")
