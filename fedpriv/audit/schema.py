"""The audit store's SQLite schema (documented table by table in ``docs/audit-store.md``).

Tables are ``STRICT`` (SQLite ≥ 3.37): a value of the wrong type is refused at insert time
instead of being stored silently. Times are Unix seconds (REAL; read them with
``datetime(col, 'unixepoch')``). Tensor files are described once, in ``tensors``, and
referenced by id. Every row of a round hangs off ``rounds`` with ``ON DELETE CASCADE``, so an
incomplete round is discarded with one ``DELETE``.
"""

from __future__ import annotations

__all__ = [
    "APPLICATION_ID",
    "ATTACK_FIELDS",
    "FAILURE_KINDS",
    "LABEL_PRIOR",
    "NO_UPDATE_PRIOR",
    "OLD_PRIOR_NAMES",
    "RUN_STATUSES",
    "SCHEMA_SQL",
    "SCHEMA_VERSION",
    "TALLY_FIELDS",
    "TENSOR_KINDS",
    "UPDATE_FIELDS",
    "UPDATE_STATUSES",
]

#: ``PRAGMA application_id`` of every fedpriv store: "fdpv" in ASCII.
APPLICATION_ID = 0x66647076
#: ``PRAGMA user_version``; bump it on any incompatible schema change. Version 2 added the
#: ``aggregates`` table (the global model after each round, for ``--resume``) and the
#: ``malformed`` failure kind. Version 3 added the verification of each client-round against its
#: declared mechanism, the canary ε lower bound, the PAC robustness fields and privacy budgets
#: (``tallies`` columns), the ``inconsistent`` and ``declined`` update statuses and the
#: ``identity``, ``inconsistent`` and ``declined`` failure kinds. Version 4 lets an accepted
#: (``ok``) update have no tensor: the run's ``audit.store_updates`` policy did not keep it.
#: Version 5 keeps the client's report itself in each ``updates`` row (``report_json``: the
#: :meth:`fedpriv.protocol.ClientReport.to_config` mapping), which live audit, ``--resume`` and
#: offline audit all read; the columns beside it are derived from it for SQL readers. Version 6
#: names the unit of privacy of every tally (``unit``, ``neighbouring``), adds the client-level
#: ε against the aggregate (``epsilon_central``) and its client rate, adds the ``undeclared``
#: update status (a reply without a report, from a stock Flower client, audited and aggregated)
#: and failure kind (such a reply refused under ``audit.undeclared = "refuse"``), and sets every
#: attack against what the attacker knew without the update: ``attacks.prior_json`` (the prior
#: baselines' scores, ``attacks.estimators.prior``) and the gains ``gain_ssim``, ``gain_psnr``.
#: Version 7 adds the ``unaccountable`` failure kind: a reply declaring releases the run's
#: accountant cannot account (docs/trust.md §1), that client's failure instead of the run's end; and
#: ``tallies.epsilon_observed_json``: ε accounted at a lower confidence bound on the noise scale
#: measured from the client's own updates (:mod:`fedpriv.verification.observed`), with the
#: round's observation, which ``--resume`` folds again; and the ``memory`` table: what the audit
#: remembers of each client-round beyond the update itself (the replay/fresh-noise sketch entry,
#: the canary pool entry), so that ``--resume`` rebuilds the same memory under every
#: ``audit.store_updates`` policy. Version 8 names how each tally's releases were sampled
#: (``tallies.sampling``: ``poisson``, ``fixed-size`` or ``none``, joined by ``+`` when rounds
#: differ, with the count of rounds accounted at q = 1 for want of a server-verified local size
#: after it in parentheses, :data:`fedpriv.ledger.UNVERIFIED_SIZE`) and, at the client level,
#: how ``epsilon_central`` was (``central_sampling``: m of N clients without replacement,
#: ``central_neighbouring``), privacy-math.md §14. Version 9 adds the ``chain`` table: every
#: write of a row, in write order, hash-chained (:mod:`fedpriv.audit.chain`). Version 10 keeps
#: what ran with every attack (``attacks.settings_json``: its options, how they were tuned on the
#: server's public data, and for ``strongest`` every member's matching residual).
SCHEMA_VERSION = 10

RUN_STATUSES = ("running", "completed", "failed", "interrupted")
UPDATE_STATUSES = ("ok", "failed", "rejected", "inconsistent", "declined", "undeclared")
FAILURE_KINDS = (
    "exception", "non-finite", "shape", "malformed", "timeout", "lost-node", "identity",
    "inconsistent", "declined", "undeclared", "unaccountable",
)  # fmt: skip
TENSOR_KINDS = ("global", "aggregate", "update", "ground_truth", "reconstruction")
#: Names of the two priors in ``attacks.prior_json`` (:mod:`attacks.estimators.prior`): the
#: public mean image (before any update) and the public class means of the recovered labels.
NO_UPDATE_PRIOR, LABEL_PRIOR = "no_update", "label"
#: The names stores of this version wrote for them before they were named for what they are
#: (the JSON's content changed, the schema did not: such stores stay readable).
OLD_PRIOR_NAMES = {"mean": NO_UPDATE_PRIOR, "class_mean": LABEL_PRIOR}

#: Keys accepted in ``write_update(meta=...)`` (``mechanism_params`` and ``report`` are stored
#: as JSON).
UPDATE_FIELDS = (
    "node_id", "num_examples", "local_steps", "lr", "batch_size", "sample_rate", "mechanism",
    "mechanism_params", "formal_guarantee", "pseudo_gradient", "status", "error", "report",
)  # fmt: skip
#: Keys accepted in ``write_tally(values=...)`` (``details`` is stored as JSON).
TALLY_FIELDS = (
    "epsilon", "delta", "accountant", "route", "optimal_order", "compose", "releases",
    "log_capacity_round", "log_capacity_cumulative", "threat_model", "mbp_bound", "abp_bound",
    "mbp_estimate", "abp_estimate", "details", "guarantee", "verification", "epsilon_declared",
    "log_capacity_declared", "epsilon_lower", "pac_accuracy", "pac_robust_confidence",
    "epsilon_budget", "unit", "neighbouring", "epsilon_central", "client_rate",
    "epsilon_observed", "sampling", "central_sampling", "central_neighbouring",
)  # fmt: skip
#: Keys accepted in ``write_attack(result=...)`` (``estimate`` and ``prior`` are stored as JSON).
ATTACK_FIELDS = (
    "attack", "iterations", "restarts", "pseudo_gradient", "mse", "psnr", "ssim", "best_mse",
    "best_psnr", "best_ssim", "label_accuracy", "relative_leakage", "mbp_estimate",
    "abp_estimate", "estimate", "seconds", "prior", "gain_ssim", "gain_psnr", "settings",
)  # fmt: skip


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"CHECK ({column} IN ({', '.join(repr(v) for v in values)}))"


SCHEMA_SQL = f"""
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    finished REAL,
    fedpriv_version TEXT NOT NULL,
    config_json TEXT NOT NULL,
    seed INTEGER NOT NULL,
    status TEXT NOT NULL {_in("status", RUN_STATUSES)},
    error TEXT
) STRICT;

CREATE TABLE rounds (
    round INTEGER PRIMARY KEY CHECK (round >= 0),
    started REAL NOT NULL,
    completed REAL,
    accuracy REAL,
    loss REAL,
    metrics_json TEXT,
    status TEXT NOT NULL CHECK (status IN ('running', 'completed')),
    CHECK ((status = 'completed') = (completed IS NOT NULL))
) STRICT;

CREATE TABLE tensors (
    tensor_id INTEGER PRIMARY KEY,
    round INTEGER NOT NULL REFERENCES rounds (round) ON DELETE CASCADE,
    kind TEXT NOT NULL {_in("kind", TENSOR_KINDS)},
    path TEXT NOT NULL UNIQUE,
    sha256 TEXT NOT NULL,
    names_json TEXT NOT NULL,
    shapes_json TEXT NOT NULL,
    dtypes_json TEXT NOT NULL,
    nbytes INTEGER NOT NULL,
    created REAL NOT NULL
) STRICT;

CREATE TABLE globals (
    round INTEGER PRIMARY KEY REFERENCES rounds (round) ON DELETE CASCADE,
    tensor_id INTEGER NOT NULL REFERENCES tensors (tensor_id)
) STRICT;

CREATE TABLE aggregates (
    round INTEGER PRIMARY KEY REFERENCES rounds (round) ON DELETE CASCADE,
    tensor_id INTEGER NOT NULL REFERENCES tensors (tensor_id)
) STRICT;

CREATE TABLE updates (
    update_id INTEGER PRIMARY KEY,
    round INTEGER NOT NULL REFERENCES rounds (round) ON DELETE CASCADE,
    client_id INTEGER NOT NULL,
    node_id TEXT,
    tensor_id INTEGER REFERENCES tensors (tensor_id),
    num_examples INTEGER,
    local_steps INTEGER,
    lr REAL,
    batch_size REAL,
    sample_rate REAL,
    mechanism TEXT,
    mechanism_params_json TEXT,
    formal_guarantee INTEGER CHECK (formal_guarantee IN (0, 1)),
    pseudo_gradient INTEGER CHECK (pseudo_gradient IN (0, 1)),
    status TEXT NOT NULL {_in("status", UPDATE_STATUSES)},
    error TEXT,
    report_json TEXT,
    created REAL NOT NULL,
    UNIQUE (round, client_id)
) STRICT;
CREATE INDEX updates_by_client ON updates (client_id, round);

CREATE TABLE ground_truth (
    round INTEGER NOT NULL REFERENCES rounds (round) ON DELETE CASCADE,
    client_id INTEGER NOT NULL,
    record_ids_json TEXT NOT NULL,
    tensor_id INTEGER REFERENCES tensors (tensor_id),
    PRIMARY KEY (round, client_id)
) STRICT;

CREATE TABLE tallies (
    round INTEGER NOT NULL REFERENCES rounds (round) ON DELETE CASCADE,
    client_id INTEGER NOT NULL,
    epsilon REAL,
    delta REAL,
    accountant TEXT,
    route TEXT,
    optimal_order REAL,
    compose TEXT,
    releases INTEGER,
    log_capacity_round REAL,
    log_capacity_cumulative REAL,
    threat_model TEXT,
    mbp_bound REAL,
    abp_bound REAL,
    mbp_estimate REAL,
    abp_estimate REAL,
    details_json TEXT,
    guarantee TEXT,
    verification_json TEXT,
    epsilon_declared REAL,
    log_capacity_declared REAL,
    epsilon_lower_json TEXT,
    pac_accuracy REAL,
    pac_robust_confidence REAL,
    epsilon_budget REAL,
    unit TEXT,
    neighbouring TEXT,
    epsilon_central REAL,
    client_rate REAL,
    epsilon_observed_json TEXT,
    sampling TEXT,
    central_sampling TEXT,
    central_neighbouring TEXT,
    PRIMARY KEY (round, client_id)
) STRICT;
CREATE INDEX tallies_by_client ON tallies (client_id, round);

CREATE TABLE attacks (
    attack_id INTEGER PRIMARY KEY,
    round INTEGER NOT NULL REFERENCES rounds (round) ON DELETE CASCADE,
    client_id INTEGER NOT NULL,
    attack TEXT NOT NULL,
    iterations INTEGER,
    restarts INTEGER,
    pseudo_gradient INTEGER CHECK (pseudo_gradient IN (0, 1)),
    mse REAL,
    psnr REAL,
    ssim REAL,
    best_mse REAL,
    best_psnr REAL,
    best_ssim REAL,
    label_accuracy REAL,
    relative_leakage REAL,
    mbp_estimate REAL,
    abp_estimate REAL,
    estimate_json TEXT,
    prior_json TEXT,
    settings_json TEXT,
    gain_ssim REAL,
    gain_psnr REAL,
    tensor_id INTEGER REFERENCES tensors (tensor_id),
    seconds REAL,
    created REAL NOT NULL
) STRICT;
CREATE INDEX attacks_by_client ON attacks (client_id, round);

CREATE TABLE memory (
    round INTEGER NOT NULL REFERENCES rounds (round) ON DELETE CASCADE,
    client_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    state BLOB NOT NULL,
    PRIMARY KEY (round, client_id, kind)
) STRICT;

CREATE TABLE chain (
    seq INTEGER PRIMARY KEY,
    tbl TEXT NOT NULL,
    key_json TEXT NOT NULL,
    round INTEGER,
    client_id INTEGER,
    digest TEXT NOT NULL,
    head TEXT NOT NULL
) STRICT;
CREATE INDEX chain_rounds ON chain (round) WHERE tbl = 'rounds';

CREATE TABLE failures (
    failure_id INTEGER PRIMARY KEY,
    round INTEGER REFERENCES rounds (round) ON DELETE CASCADE,
    client_id INTEGER,
    node_id TEXT,
    kind TEXT NOT NULL {_in("kind", FAILURE_KINDS)},
    message TEXT NOT NULL,
    created REAL NOT NULL
) STRICT;
"""
