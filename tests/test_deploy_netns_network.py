"""Network namespaces as hosts: real TCP between hosts on one switch, a cut link that carries
nothing until restored, no route from another subnet, per-host /etc/hosts names, and nothing
left behind. Each check talks TCP through a server and a client started on the hosts with
``ip netns exec``, i.e. through the kernel, not through our bookkeeping."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from process_support import PATIENCE, netns_prefix

from fedpriv.errors import InputError
from workflows.deploy.hosts import LOCALHOST, Host
from workflows.deploy.netns import NetnsNetwork, netns_unavailable

UNAVAILABLE = netns_unavailable()
needs_netns = pytest.mark.skipif(UNAVAILABLE is not None, reason=str(UNAVAILABLE))

PORT = 47001
# accept one connection and answer "hello" (or give up after argv[3] seconds)
SERVER = """
import socket, sys
s = socket.create_server((sys.argv[1], int(sys.argv[2])))
s.settimeout(float(sys.argv[3]))
print("listening", flush=True)
conn, _ = s.accept()
conn.sendall(b"hello")
conn.close()
"""
# print what the server said, or the name of the error, within `timeout` seconds
CLIENT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])) as c:
        print(c.recv(5).decode())
except OSError as exc:
    print(type(exc).__name__, exc.errno)
"""


@pytest.fixture
def network() -> Iterator[NetnsNetwork]:
    with NetnsNetwork(netns_prefix()) as net:
        yield net
    assert net.leftovers() == []


def _serve(host: Host) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        host.command([sys.executable, "-c", SERVER, host.address, str(PORT), str(PATIENCE)]),
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "listening\n"
    return proc


def _dial(client: Host, address: str, timeout: float = PATIENCE) -> str:
    """What ``client`` hears from ``address`` (an answer arrives as soon as the server sends
    it; ``timeout`` is only reached when nothing can arrive)."""
    argv = [sys.executable, "-c", CLIENT, address, str(PORT), str(timeout)]
    done = subprocess.run(client.command(argv), capture_output=True, text=True,
                          timeout=timeout + PATIENCE)
    return done.stdout.strip()


def _dial_until_answered(client: Host, address: str) -> str:
    """Dial until the server answers, or :data:`PATIENCE` passes: a restored port carries
    traffic only once its carrier is back and the neighbour entry that failed during the cut
    is probed again (meanwhile a dial fails at once, ``OSError 113``, never reaching the
    server), which takes seconds on a loaded machine."""
    deadline = time.monotonic() + PATIENCE
    while (said := _dial(client, address)) != "hello" and time.monotonic() < deadline:
        time.sleep(0.5)
    return said


def test_host_command_prefix() -> None:
    assert LOCALHOST.command(["true"]) == ["true"]
    assert Host("10.0.0.1", "ns1").command(["true", "x"]) == [
        "ip", "netns", "exec", "ns1", "true", "x",
    ]  # fmt: skip


@needs_netns
def test_hosts_talk_tcp_and_a_cut_link_carries_nothing(network: NetnsNetwork) -> None:
    a = network.add_host("a", "10.231.7.1/24")
    b = network.add_host("b", "10.231.7.2/24")
    server = _serve(a)
    try:
        network.cut(b)
        # dropped, not refused (111): the dial times out, or, if the process was descheduled
        # past the failed neighbour discovery (about 3 s), the host is unreachable (113)
        assert _dial(b, a.address, timeout=2) in ("TimeoutError None", "OSError 113")
        network.restore(b)
        assert _dial_until_answered(b, a.address) == "hello"
    finally:
        server.kill()
        server.wait()


@needs_netns
def test_another_subnet_has_no_route_and_names_resolve_per_host(network: NetnsNetwork) -> None:
    a = network.add_host("a", "10.231.7.1/24")
    b = network.add_host("b", "10.231.7.2/24", names={"link.test": a.address})
    e = network.add_host("e", "10.231.8.5/24", names={"link.test": a.address})
    assert _dial(e, a.address) == "OSError 101"  # ENETUNREACH, at once
    server = _serve(a)
    try:
        assert _dial(b, "link.test") == "hello"  # b's /etc/hosts, not the machine's
    finally:
        server.kill()
        server.wait()
    assert "link.test" not in Path("/etc/hosts").read_text()


@needs_netns
def test_close_removes_namespaces_processes_and_etc_entries() -> None:
    network = NetnsNetwork(netns_prefix())
    network.start()
    try:
        a = network.add_host("a", "10.231.7.1/24", names={"x.test": "10.231.7.9"})
        sleeper = subprocess.Popen(a.command(["sleep", "300"]))
        assert network.pids() == [sleeper.pid]
        assert Path("/etc/netns", a.netns or "", "hosts").is_file()
    finally:
        network.close()
    assert sleeper.wait(timeout=PATIENCE) == -9
    assert network.leftovers() == []
    assert not Path("/etc/netns", a.netns or "").exists()
    network.close()  # idempotent


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [({"name": "A"}, "name"), ({"name": "a" * 13}, "name"), ({"cidr": "10.0.0.1"}, "cidr"),
     ({"cidr": "nonsense/24"}, "cidr")],
)  # fmt: skip
def test_bad_host_arguments_are_refused_before_anything_is_made(kwargs, key) -> None:
    network = NetnsNetwork()  # not started: nothing exists, and nothing may be created
    args = {"name": "a", "cidr": "10.0.0.1/24", **kwargs}
    with pytest.raises(InputError, match=f"^{key} = "):
        network.add_host(args["name"], args["cidr"])
    assert network._created == []


def test_bad_prefix_is_refused() -> None:
    with pytest.raises(InputError, match="^prefix = "):
        NetnsNetwork("Bad-Prefix")


# a process holding a network with a host and a sleeping process in it until a signal comes
# (or its stdin closes: the test ended)
HOLDER = textwrap.dedent(
    """
    import os, signal, subprocess, sys
    from pathlib import Path
    from workflows.deploy.netns import NetnsNetwork
    # Ctrl-C reaches the holder as it reaches a foreground process, even when the tests run in
    # a shell's background job (which starts with SIGINT ignored, and Python keeps that)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from workflows.deploy.processes import ProcessGroup
    network = NetnsNetwork(sys.argv[1])
    network.start()
    host = network.add_host("a", "10.231.7.1/24", names={"x.test": "10.231.7.9"})
    group = ProcessGroup(stop_timeout=5)
    group.start("sleep", host.command(["sleep", "300"]), env=os.environ, cwd=Path.cwd(),
                stdout=subprocess.DEVNULL)
    print(network.prefix, group.procs["sleep"].pid, flush=True)
    sys.stdin.read()
    """
)


@needs_netns
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_holder_removes_its_network(tmp_path: Path, signum: int) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, netns_prefix()], cwd=tmp_path, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        prefix, sleeper = holder.stdout.readline().split() if holder.stdout else ("", "")
        network = NetnsNetwork(prefix)  # a view of the holder's namespaces, for leftovers()
        assert network.leftovers() == [f"{prefix}-a", f"{prefix}-sw"]
        holder.send_signal(signum)
        assert holder.wait(timeout=PATIENCE) != 0
    finally:
        holder.kill()
        holder.wait()
    assert network.leftovers() == []
    assert not Path(f"/proc/{sleeper}").exists()
    assert not Path(f"/etc/netns/{prefix}-a").exists()
