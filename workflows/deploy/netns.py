"""Several hosts on one Linux machine: network namespaces joined by a virtual switch.

Each host is a network namespace (``ip netns add``, see ip-netns(8)) with its loopback up and
one interface ``eth0``, a veth whose peer is a port of a bridge; the bridge lives in a
namespace of its own, the *switch*. Nothing is created in this machine's own namespace, so
interface names, addresses and ports cannot collide with other processes, and two networks
may use the same addresses. Traffic between hosts is real TCP over the veth links. A link is
cut with ``ip link set PORT down`` on the switch side: the host's ``eth0`` loses its carrier,
and packets on the link are dropped with no reset sent to either end, as when a cable is
pulled at the switch.

A host may get its own ``/etc/hosts`` (``ip netns exec`` bind-mounts ``/etc/netns/NAME/*``
over ``/etc``), so that a name resolves to an address inside that host only.

A network is removed when its ``with`` block ends, and also when the interpreter exits or gets
SIGINT/SIGTERM (after the federation's processes have stopped; see
:func:`workflows.deploy.processes.close_on_exit`); only SIGKILL leaves namespaces behind
(``ip netns list``; ``ip netns delete NAME`` removes one).

Needs root (``CAP_SYS_ADMIN`` and ``CAP_NET_ADMIN``) and iproute2's ``ip``.
:func:`netns_unavailable` says why a machine cannot run it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

from fedpriv.errors import InputError
from fedpriv.validate import check_match
from workflows.deploy.hosts import Host
from workflows.deploy.processes import close_on_exit, kill_pids

__all__ = ["NetnsError", "NetnsNetwork", "netns_unavailable"]

_ETC_NETNS = Path("/etc/netns")
_BRIDGE = "br0"
_HOST_NAME = r"[a-z][a-z0-9]{0,11}"  # the switch port is named after the host: <= 15 chars


class NetnsError(RuntimeError):
    """An ``ip`` command failed; the message holds the command and its stderr."""


def _ip(*args: str) -> str:
    """Run ``ip ARGS``; return its stdout or raise :class:`NetnsError`."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _namespaces() -> set[str]:
    """Names in ``ip netns list`` (each line is ``NAME`` or ``NAME (id: N)``)."""
    return {line.split()[0] for line in _ip("netns", "list").splitlines() if line.strip()}


class NetnsNetwork:
    """Hosts (network namespaces) on one switch, as a context manager that removes them all.

    Parameters
    ----------
    prefix
        Prefix of every namespace name (``PREFIX-sw`` for the switch, ``PREFIX-NAME`` for
        host NAME); default ``fp`` and six random hex digits, unique on the machine.
    """

    def __init__(self, prefix: str | None = None) -> None:
        self.prefix = check_match(
            "prefix", prefix or f"fp{secrets.token_hex(3)}", r"[a-z][a-z0-9]{0,15}",
            "a lower-case letter, then up to 15 lower-case letters or digits",
        )  # fmt: skip
        self.switch = f"{self.prefix}-sw"
        self.hosts: dict[str, Host] = {}
        self._created: list[str] = []  # namespaces, in creation order
        self._made_etc_netns = False  # whether this network created /etc/netns
        close_on_exit(self)  # namespaces outlive this process: remove them on exit or signal

    def __enter__(self) -> NetnsNetwork:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        """Create the switch: a namespace holding the bridge every host is attached to."""
        self._add_namespace(self.switch)
        _ip("-n", self.switch, "link", "add", "name", _BRIDGE, "type", "bridge")
        _ip("-n", self.switch, "link", "set", "dev", _BRIDGE, "up")

    def _add_namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self._created.append(name)
        _ip("-n", name, "link", "set", "dev", "lo", "up")

    def add_host(self, name: str, cidr: str, *, names: Mapping[str, str] | None = None) -> Host:
        """Create host ``name`` with address ``cidr`` on ``eth0``, plugged into the switch.

        Parameters
        ----------
        name
            Short host name (a lower-case letter, then up to 11 lower-case letters or digits).
        cidr
            The host's address and prefix length, e.g. ``"10.231.7.1/24"``. Only addresses of
            the same subnet are reachable: no host has a default route, so a host given an
            address of another subnet is on the switch but has no route to the others.
        names
            ``/etc/hosts`` entries (name → address) seen by commands run on this host.

        Returns
        -------
        Host
            ``Host(address, netns)``; run commands on it with :meth:`Host.command`.
        """
        check_match("name", name, _HOST_NAME, "a lower-case letter, then up to 11 letters/digits")
        if name in self.hosts:
            raise InputError("name", name, f"a name not in {sorted(self.hosts)}")
        try:
            address = str(ipaddress.ip_interface(cidr).ip) if "/" in cidr else ""
        except ValueError:
            address = ""
        if not address:
            raise InputError("cidr", cidr, "an address with a prefix length, e.g. 10.0.0.1/24")
        netns = f"{self.prefix}-{name}"
        self._add_namespace(netns)
        if names:
            lines = ["127.0.0.1 localhost", *(f"{a} {n}" for n, a in names.items())]
            self._made_etc_netns |= not _ETC_NETNS.exists()
            (_ETC_NETNS / netns).mkdir(parents=True, exist_ok=True)
            (_ETC_NETNS / netns / "hosts").write_text("\n".join(lines) + "\n")
        _ip("-n", self.switch, "link", "add", "name", name, "type", "veth",
            "peer", "name", "eth0", "netns", netns)  # fmt: skip
        _ip("-n", self.switch, "link", "set", "dev", name, "master", _BRIDGE, "up")
        _ip("-n", netns, "addr", "add", cidr, "dev", "eth0")
        _ip("-n", netns, "link", "set", "dev", "eth0", "up")
        self.hosts[name] = host = Host(address, netns)
        return host

    def _port(self, host: Host) -> str:
        (name,) = [n for n, h in self.hosts.items() if h == host]
        return name

    def cut(self, host: Host) -> None:
        """Take ``host``'s switch port down: its link carries nothing until :meth:`restore`."""
        _ip("-n", self.switch, "link", "set", "dev", self._port(host), "down")

    def restore(self, host: Host) -> None:
        """Bring ``host``'s switch port back up."""
        _ip("-n", self.switch, "link", "set", "dev", self._port(host), "up")

    def pids(self) -> list[int]:
        """Processes running in any namespace of this network."""
        found: list[int] = []
        live = _namespaces()
        for name in self._created:
            if name in live:
                found += [int(p) for p in _ip("netns", "pids", name).split()]
        return sorted(found)

    def leftovers(self) -> list[str]:
        """Namespaces of this network still listed by ``ip netns list`` (none after close)."""
        return sorted(n for n in _namespaces() if n.startswith(f"{self.prefix}-"))

    def close(self) -> None:
        """SIGKILL any process left in the namespaces, delete them (the veth pairs and the
        bridge go with them) and their ``/etc/netns`` entries. Idempotent."""
        kill_pids(self.pids(), signal.SIGKILL)
        live = _namespaces()
        for name in reversed(self._created):
            if name in live:
                _ip("netns", "delete", name)
            shutil.rmtree(_ETC_NETNS / name, ignore_errors=True)
        if self._made_etc_netns:
            with contextlib.suppress(OSError):  # not empty: someone else's files are there
                _ETC_NETNS.rmdir()
            self._made_etc_netns = False
        self._created.clear()
        self.hosts.clear()


def netns_unavailable() -> str | None:
    """Why this machine cannot build a :class:`NetnsNetwork` (None when it can): not root, no
    ``ip``, or creating a namespace, a bridge or a veth pair fails."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "network namespaces need iproute2's `ip`"
    try:
        with NetnsNetwork() as network:
            network.add_host("probe", "10.231.255.1/24")
    except NetnsError as exc:
        return f"cannot build a network of namespaces: {exc}"
    return None
