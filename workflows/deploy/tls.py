"""Throwaway TLS material and SuperNode authentication keys for a Flower federation.

A self-signed CA signs one server certificate whose subject alternative names cover the
addresses the SuperNodes and the ``flwr`` CLI dial (by default ``DNS:localhost`` and
``IP:127.0.0.1``; any IP addresses and DNS names may be given); a SAN mismatch is the classic
TLS failure with Flower (flwr issue #1499). SuperNode keys are
ECDSA (Flower 1.41 accepts only NIST EC curves for ``--auth-supernode-private-key``) written in
the OpenSSH private-key format that ``flower-supernode`` loads with ``load_ssh_private_key``,
and the ``.pub`` in OpenSSH public-key format that ``flwr supernode register`` loads.
Everything is generated with the ``cryptography`` package; nothing is meant to outlive a run.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fedpriv.errors import InputError

__all__ = ["TlsFiles", "write_supernode_key", "write_tls_files"]

_VALIDITY = dt.timedelta(days=7)
_CURVE = ec.SECP384R1()


@dataclass(frozen=True)
class TlsFiles:
    """Paths of the PEM files a TLS SuperLink and its clients need."""

    ca_cert: Path
    server_cert: Path
    server_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(
    subject: str, issuer: str, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
    )


def _ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(_CURVE)
    cert = (
        _builder(common_name, common_name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            _key_usage(key_cert_sign=True, crl_sign=True),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _server(
    ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, hosts: list[str]
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(_CURVE)
    issuer = ca_cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    san = [_general_name(h) for h in hosts]
    cert = (
        _builder(hosts[0], str(issuer), key.public_key())
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def _key_usage(**enabled: bool) -> x509.KeyUsage:
    flags = (
        "digital_signature",
        "content_commitment",
        "key_encipherment",
        "data_encipherment",
        "key_agreement",
        "key_cert_sign",
        "crl_sign",
        "encipher_only",
        "decipher_only",
    )
    return x509.KeyUsage(**{flag: enabled.get(flag, False) for flag in flags})


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def write_tls_files(
    directory: Path, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")
) -> TlsFiles:
    """Create a throwaway CA and a server certificate it signs, as PEM files in ``directory``.

    Parameters
    ----------
    directory
        Created if missing; receives ``ca.crt``, ``server.pem`` and ``server.key`` (mode 0600).
    hosts
        DNS names and IP addresses (IPv4 or IPv6) for the server certificate's subject
        alternative names, at least one; the first is also its common name.

    Returns
    -------
    TlsFiles
        The three paths, as ``flower-superlink --ssl-ca-certfile/--ssl-certfile/--ssl-keyfile``
        and ``flower-supernode --root-certificates`` take them.
    """
    if not hosts or not all(isinstance(h, str) and h for h in hosts):
        raise InputError("hosts", hosts, "one or more non-empty DNS names or IP addresses")
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _ca("fedpriv throwaway CA")
    key, cert = _server(ca_key, ca_cert, list(hosts))
    files = TlsFiles(directory / "ca.crt", directory / "server.pem", directory / "server.key")
    files.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.server_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_private(
        files.server_key,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    return files


def write_supernode_key(path: Path) -> tuple[Path, Path]:
    """Write an ECDSA P-384 SuperNode key pair in OpenSSH format: ``path`` and ``path.pub``.

    The private key (mode 0600) is what ``flower-supernode --auth-supernode-private-key`` takes;
    the public key is what ``flwr supernode register`` takes.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(_CURVE)
    _write_private(
        path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        ),
    )
    public = path.with_name(path.name + ".pub")
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        + b" fedpriv-supernode\n"
    )
    return path, public
