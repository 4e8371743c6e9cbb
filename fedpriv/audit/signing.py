"""The record's head signed with an Ed25519 key the user keeps outside the run directory.

Whoever can write a run directory can edit its database and recompute every later head of the
chain (:mod:`fedpriv.audit.chain`); they cannot sign the new head without the private key. The
signature of the final head is ``chain-signature.json`` in the run directory (``seq``,
``head``, ``public_key``, ``signature``, hex); :func:`signature_problem` checks it against the
public key the user keeps and the recomputed chain. The message signed is the ASCII text
:data:`MESSAGE` filled with the entry number and its head.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedpriv.atomic import atomic_write_bytes
from fedpriv.audit.chain import chain_heads, final_head
from fedpriv.errors import InputError

if TYPE_CHECKING:  # cryptography loads when a key is read: the report only reads the file
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from fedpriv.audit.store import AuditStore

__all__ = [
    "MESSAGE", "SIGNATURE_NAME", "head_summary", "load_private_key", "load_public_key",
    "read_signature", "sign_head", "signature_problem",
]

#: The signature's file in the run directory.
SIGNATURE_NAME = "chain-signature.json"
#: What is signed: the chain entry's number and its head (hex).
MESSAGE = "fedpriv audit chain v1\n{seq}\n{head}\n"


def _read_key(flag: str, path: Path | str, loader: Any, kind: type, what: str) -> Any:
    try:
        data = Path(path).read_bytes()
        key = loader(data)
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(flag, str(path), f"a readable {what} in PEM ({exc})") from None
    if not isinstance(key, kind):
        raise InputError(flag, str(path), f"an Ed25519 {what}, not {type(key).__name__}")
    return key


def load_private_key(path: Path | str, run_dir: Path | str) -> Ed25519PrivateKey:
    """The Ed25519 private key at ``path`` (PEM, PKCS #8, unencrypted), kept outside
    ``run_dir``: a key stored beside the record would let whoever edits it sign it.

    Raises
    ------
    InputError
        Unreadable, not an Ed25519 private key, encrypted, or inside ``run_dir``.
    """
    if Path(path).resolve().is_relative_to(Path(run_dir).resolve()):
        raise InputError("--sign-key", str(path), "a key kept outside the run directory")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return _read_key("--sign-key", path,
                     lambda data: serialization.load_pem_private_key(data, password=None),
                     Ed25519PrivateKey, "private key (unencrypted PKCS #8)")


def load_public_key(path: Path | str) -> Ed25519PublicKey:
    """The Ed25519 public key at ``path`` (PEM, SubjectPublicKeyInfo).

    Raises
    ------
    InputError
        Unreadable or not an Ed25519 public key.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    return _read_key("--public-key", path, serialization.load_pem_public_key, Ed25519PublicKey,
                     "public key")


def sign_head(store: AuditStore, key: Ed25519PrivateKey) -> dict[str, Any]:
    """Sign the store's final head and write the signature, durably, to the run directory's
    :data:`SIGNATURE_NAME`; returns what was written."""
    from cryptography.hazmat.primitives import serialization

    with store.snapshot() as conn:
        seq, head = final_head(conn)
    message = MESSAGE.format(seq=seq, head=head).encode("ascii")
    public = key.public_key().public_bytes(encoding=serialization.Encoding.Raw,
                                           format=serialization.PublicFormat.Raw)
    signed = {"seq": seq, "head": head, "public_key": public.hex(),
              "signature": key.sign(message).hex()}
    atomic_write_bytes(store.run_dir / SIGNATURE_NAME, (json.dumps(signed, indent=2) + "\n")
                       .encode("ascii"))
    return signed


def read_signature(run_dir: Path | str) -> dict[str, Any] | None:
    """The run's signature as written by :func:`sign_head`; None when the run has none (or it
    is not readable JSON: :func:`signature_problem` then names it)."""
    path = Path(run_dir) / SIGNATURE_NAME
    try:
        signed = json.loads(path.read_text(encoding="ascii"))
    except (OSError, ValueError):
        return None
    return signed if isinstance(signed, dict) else None


def head_summary(store: AuditStore) -> dict[str, Any]:
    """What the run's report carries of its chain, to be kept outside the run directory:
    ``head``, ``entries``, ``rounds`` (each completed round's head) and ``signature`` (the
    run's :data:`SIGNATURE_NAME`, or None)."""
    with store.snapshot() as conn:
        summary = chain_heads(conn)
    return {**summary, "signature": read_signature(store.run_dir)}


def signature_problem(
    signed: dict[str, Any] | None, key: Ed25519PublicKey, heads: Sequence[str]
) -> str | None:
    """Why the signature does not vouch for the recomputed chain ``heads`` (entry ``i`` at
    ``heads[i - 1]``) under the user's public ``key``; None when it does."""
    from cryptography.exceptions import InvalidSignature

    if signed is None:
        return f"no readable {SIGNATURE_NAME}: the run's head was not signed"
    seq, head = signed.get("seq"), signed.get("head")
    try:
        message = MESSAGE.format(seq=int(seq), head=str(head)).encode("ascii")
        key.verify(bytes.fromhex(str(signed.get("signature"))), message)
    except (InvalidSignature, TypeError, ValueError, UnicodeEncodeError):
        return f"{SIGNATURE_NAME} is not a signature of its head by this public key"
    if not 1 <= int(seq) <= len(heads) or heads[int(seq) - 1] != head:
        return (f"the signed head of entry {seq} is not the recomputed one: the record was "
                "rewritten and re-chained")
    return None
