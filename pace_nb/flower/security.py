"""Credentials of a secured Flower deployment (Flower 1.42's documented mechanisms).

* **TLS**: a certificate authority, and a SuperLink certificate it signs for the deployment's
  host (``flower-superlink --ssl-ca-certfile --ssl-certfile --ssl-keyfile``); SuperNodes and
  ``flwr`` verify it with the CA (``--root-certificates``, ``root-certificates`` in the
  connection config).
* **SuperNode authentication**: one NIST P-384 key pair per SuperNode, OpenSSH encoded; the
  SuperLink runs with ``--enable-supernode-auth`` and admits only the public keys registered with
  ``flwr supernode register``; a SuperNode signs with ``--auth-supernode-private-key``.

:func:`make_credentials` writes a loopback demo set (keys mode 0600). For real machines use
your own CA and certificates (docs/FLOWER.md).
"""
from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Credentials:
    """Paths of one deployment's credentials."""

    ca: Path
    server_cert: Path
    server_key: Path
    node_keys: tuple[tuple[Path, Path], ...]  # (private, public) per SuperNode


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return path


def _ec_key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP384R1())


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization as s

    return key.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption())


def certificate_authority(name: str = "pace-nb demo CA", days: int = 7):
    """(key, certificate) of a self-signed CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    key = _ec_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def server_certificate(ca_key, ca_cert, host: str, days: int = 7):
    """(key, certificate) for the SuperLink at ``host`` (an IP address or a DNS name), signed by the CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    key = _ec_key()
    try:
        san: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(host))]
    except ValueError:
        san = [x509.DNSName(host)]
    if host in ("127.0.0.1", "localhost"):
        san = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(san), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    return key, cert


def node_key_pair(private: Path, public: Path) -> tuple[Path, Path]:
    """A SuperNode's P-384 key pair in OpenSSH encoding (what Flower's node authentication reads)."""
    from cryptography.hazmat.primitives import serialization as s

    key = _ec_key()
    _write(private, key.private_bytes(s.Encoding.PEM, s.PrivateFormat.OpenSSH, s.NoEncryption()), private=True)
    _write(public, key.public_key().public_bytes(s.Encoding.OpenSSH, s.PublicFormat.OpenSSH))
    return private, public


def make_credentials(folder: Path, num_nodes: int, host: str = "127.0.0.1") -> Credentials:
    """A CA, the SuperLink's certificate for ``host`` and ``num_nodes`` SuperNode key pairs in ``folder``."""
    from cryptography.hazmat.primitives import serialization as s

    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    ca_key, ca_cert = certificate_authority()
    key, cert = server_certificate(ca_key, ca_cert, host)
    ca = _write(folder / "ca.crt", ca_cert.public_bytes(s.Encoding.PEM))
    server_cert = _write(folder / "server.pem", cert.public_bytes(s.Encoding.PEM))
    server_key = _write(folder / "server.key", _pem_key(key), private=True)
    nodes = tuple(node_key_pair(folder / f"node_{k}.key", folder / f"node_{k}.pub") for k in range(num_nodes))
    return Credentials(ca, server_cert, server_key, nodes)
