"""The library function behind ``fedpriv verify RUN_DIR [--head H | --public-key PUB]``: is a
run's audit record intact (docs/audit-store.md, "The hash chain")?

It recomputes the record's hash chain and every tensor file's SHA-256
(:func:`fedpriv.audit.verify.examine`) and, when given, checks a head the user kept
(``--head``: it must be the head of one of the recomputed entries) or the run's signature
under the user's public key (``--public-key``). The record is intact when no error is found;
the first error in write order names the broken record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedpriv.audit.store import DB_NAME
from fedpriv.audit.verify import Problem, examine
from fedpriv.errors import InputError
from fedpriv.validate import check_match

__all__ = ["verify_run"]


def _head_problem(head: str, heads: list[str]) -> tuple[str | None, dict[str, Any] | None]:
    if head not in heads:
        return ("the head given is not in the recomputed chain: the record was rewritten and "
                "re-chained, or is another run's"), None
    seq = heads.index(head) + 1
    return None, {"seq": seq, "head": head, "entries_after": len(heads) - seq}


def verify_run(
    run_dir: Path | str, *, head: str | None = None, public_key: Path | str | None = None
) -> dict[str, Any]:
    """Check a run's audit record.

    Parameters
    ----------
    run_dir
        The run directory.
    head
        A head the user kept (64 hex digits): the chain must pass through it.
    public_key
        The PEM Ed25519 public key whose private key signed the run's head (``simulate
        --sign-key``): the signature must verify and its head be the recomputed one.

    Returns
    -------
    dict
        ``run_dir``, ``intact``, ``entries`` and ``head`` (the recomputed chain; 0 and None
        when the chain itself is broken), ``first`` (the first error, in words, or None),
        ``anchor`` (where the given or signed head lies in the chain: ``seq``, ``head``,
        ``entries_after``; None without one) and ``problems`` (every finding).

    Raises
    ------
    InputError
        Not a run directory, an unreadable store, a malformed head or key.
    """
    if head is not None and public_key is not None:
        raise InputError("--head/--public-key", True, "one of the two")
    if head is not None:
        head = check_match("--head", head.strip().lower(), r"[0-9a-f]{64}",
                           "a chain head: 64 hexadecimal digits")
    key = None
    if public_key is not None:
        from fedpriv.audit.signing import load_public_key

        key = load_public_key(public_key)
    problems, heads = examine(run_dir)
    db = str(Path(run_dir) / DB_NAME)
    anchor = None
    if heads and head is not None:
        message, anchor = _head_problem(head, heads)
        problems += [Problem("error", "head", db, message)] if message else []
    elif heads and key is not None:
        from fedpriv.audit.signing import read_signature, signature_problem

        signed = read_signature(run_dir)
        message = signature_problem(signed, key, heads)
        problems += [Problem("error", "signature", db, message)] if message else []
        anchor = None if message else _head_problem(signed["head"], heads)[1]
    errors = [p for p in problems if p.severity == "error"]
    return {
        "run_dir": str(run_dir), "intact": not errors, "entries": len(heads),
        "head": heads[-1] if heads else None, "first": errors[0].message if errors else None,
        "anchor": anchor, "problems": [p.to_dict() for p in problems],
    }  # fmt: skip
