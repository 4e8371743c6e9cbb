"""Throwaway TLS material and SuperNode keys, checked by independent routes: the CA's signature
verified by `cryptography`, a real TLS handshake through Python's `ssl` (OpenSSL) with hostname
checking for both SAN entries, and Flower's own key loaders."""

from __future__ import annotations

import ipaddress
import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import (
    load_pem_private_key,
    load_ssh_private_key,
    load_ssh_public_key,
)
from process_support import PATIENCE

from fedpriv.errors import InputError
from workflows.deploy.tls import write_supernode_key, write_tls_files


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory):
    return write_tls_files(tmp_path_factory.mktemp("certs"))


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_ca_signs_server_cert(tls_files) -> None:
    ca, server = _cert(tls_files.ca_cert), _cert(tls_files.server_cert)
    server.verify_directly_issued_by(ca)  # raises on a bad signature or issuer mismatch
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_server_cert_san_covers_loopback(tls_files) -> None:
    san = (
        _cert(tls_files.server_cert)
        .extensions.get_extension_for_class(x509.SubjectAlternativeName)
        .value
    )
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]


def test_server_key_matches_cert_and_is_private(tls_files) -> None:
    key = load_pem_private_key(tls_files.server_key.read_bytes(), password=None)
    assert key.public_key() == _cert(tls_files.server_cert).public_key()
    assert stat.S_IMODE(tls_files.server_key.stat().st_mode) == 0o600


def _handshake(tls_files, cafile: Path, server_hostname: str) -> None:
    """Serve one TLS connection on 127.0.0.1 with the server cert; connect as a client that
    trusts ``cafile`` and checks ``server_hostname`` (OpenSSL matches an IP address against
    the IP entries of the SAN, a name against its DNS entries)."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tls_files.server_cert, tls_files.server_key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client_ctx = ssl.create_default_context(cafile=str(cafile))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as raw:
            with client_ctx.wrap_socket(raw, server_hostname=server_hostname) as tls:
                tls.sendall(b"x")
    finally:
        thread.join(timeout=PATIENCE)
        listener.close()


@pytest.mark.parametrize("hostname", ["localhost", "127.0.0.1"])
def test_tls_handshake_verifies_for_both_names(tls_files, hostname: str) -> None:
    _handshake(tls_files, tls_files.ca_cert, hostname)


def test_tls_handshake_fails_with_another_ca(tls_files, tmp_path: Path) -> None:
    other = write_tls_files(tmp_path / "other")
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(tls_files, other.ca_cert, "localhost")


def test_tls_handshake_fails_for_a_name_not_in_san(tls_files) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(tls_files, tls_files.ca_cert, "example.org")


def test_certificate_for_another_address_names_that_address_only(tmp_path: Path) -> None:
    """A SuperLink on another host: the certificate carries 10.231.7.1 and nothing else."""
    files = write_tls_files(tmp_path / "a", hosts=("10.231.7.1",))
    san = _cert(files.server_cert).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert list(san.value) == [x509.IPAddress(ipaddress.ip_address("10.231.7.1"))]
    _handshake(files, files.ca_cert, "10.231.7.1")
    for other in ("127.0.0.1", "localhost", "10.231.7.2"):
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(files, files.ca_cert, other)


def test_ipv6_and_dns_names_go_to_their_own_san_types(tmp_path: Path) -> None:
    files = write_tls_files(tmp_path / "b", hosts=("superlink.example.org", "fd00::5"))
    san = _cert(files.server_cert).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert san.value.get_values_for_type(x509.DNSName) == ["superlink.example.org"]
    assert san.value.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("fd00::5")]
    _handshake(files, files.ca_cert, "superlink.example.org")


@pytest.mark.parametrize("hosts", [(), ("",)])
def test_a_certificate_needs_a_name(tmp_path: Path, hosts) -> None:
    with pytest.raises(InputError, match="^hosts = "):
        write_tls_files(tmp_path / "c", hosts=hosts)
    assert not (tmp_path / "c").exists()


def test_supernode_key_formats(tmp_path: Path) -> None:
    private_path, public_path = write_supernode_key(tmp_path / "keys" / "supernode_0")
    private = load_ssh_private_key(private_path.read_bytes(), password=None)
    public = load_ssh_public_key(public_path.read_bytes())
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    assert isinstance(private.curve, ec.SECP384R1)
    assert private.public_key() == public
    assert stat.S_IMODE(private_path.stat().st_mode) == 0o600
    assert public_path.read_text().startswith("ecdsa-sha2-nistp384 ")


def test_flower_accepts_the_public_key(tmp_path: Path) -> None:
    """`flwr supernode register` loads the .pub with this function (exits on a bad key)."""
    from flwr.cli.supernode.register import try_load_public_key
    from flwr.supercore.primitives.asymmetric import public_key_to_bytes

    private_path, public_path = write_supernode_key(tmp_path / "supernode_1")
    private = load_ssh_private_key(private_path.read_bytes(), password=None)
    assert try_load_public_key(public_path) == public_key_to_bytes(private.public_key())
