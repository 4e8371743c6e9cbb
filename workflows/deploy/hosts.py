"""Where a process of a federation runs: this machine's own network stack, or a namespace.

A :class:`Host` is a network stack plus the address other hosts reach it at. On one machine
every host is :data:`LOCALHOST`; :mod:`workflows.deploy.netns` makes hosts that are Linux
network namespaces, so that a federation's processes talk over real links between addresses
of their own. A command runs on a namespace host through ``ip netns exec NAME``, which
``setns``-es and then ``exec``-s the command itself (iproute2 forks only in batch mode), so
the process started is the command, with its process id, process group and environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workflows.deploy.ports import LOOPBACK

__all__ = ["LOCALHOST", "Host"]


@dataclass(frozen=True)
class Host:
    """A network stack that runs processes of a federation.

    Parameters
    ----------
    address
        The address (IP or DNS name) other hosts dial to reach a server on this host; a
        SuperLink on this host listens on it.
    netns
        The network namespace (``ip netns list``) holding the stack; None for the stack of
        this process.
    """

    address: str
    netns: str | None = None

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run on this host: as it is, or through ``ip netns exec NETNS``."""
        if self.netns is None:
            return list(argv)
        return ["ip", "netns", "exec", self.netns, *argv]


LOCALHOST = Host(LOOPBACK)
