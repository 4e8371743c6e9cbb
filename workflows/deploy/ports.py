"""Free TCP ports on the loopback interface.

The ports are found by binding to port 0 and asking the kernel which port it chose; all sockets
are held open until every port of the request has been chosen, so one call never returns the
same port twice. A port is free when returned, not reserved: another process could take it
before the caller binds it (the usual race, negligible on a test machine).
"""

from __future__ import annotations

import socket
from contextlib import ExitStack

from fedpriv.errors import InputError

__all__ = ["LOOPBACK", "free_ports"]

LOOPBACK = "127.0.0.1"


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """Return ``count`` distinct TCP ports that were free on ``host`` at the time of the call.

    Parameters
    ----------
    count
        How many ports (≥ 1).
    host
        Interface to probe; the loopback address by default, where every fedpriv server listens.

    Returns
    -------
    list[int]
        Distinct port numbers.
    """
    if count < 1:
        raise InputError("count", count, "an integer >= 1")
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(sock.getsockname()[1])
    return ports
