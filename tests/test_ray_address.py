"""``simulation.ray_address = "auto"`` is resolved as Ray resolves it: ``$RAY_ADDRESS``, else
the address file under Ray's temp directory (``$RAY_TMPDIR/ray``, ``$TMPDIR/ray`` on Linux,
``/tmp/ray``); an address that does not answer is refused naming the key."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from fedpriv.errors import InputError
from workflows.simulation import check_ray_address, ray_address_file


@pytest.fixture
def listening():
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"127.0.0.1:{server.getsockname()[1]}"


@pytest.fixture
def dead():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    return f"127.0.0.1:{port}"  # closed: connections are refused


def test_the_address_file_follows_ray_s_temp_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "t"))
    assert ray_address_file() == tmp_path / "t" / "ray" / "ray_current_cluster"
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "r"))
    assert ray_address_file() == tmp_path / "r" / "ray" / "ray_current_cluster"
    monkeypatch.delenv("RAY_TMPDIR")
    monkeypatch.delenv("TMPDIR")
    assert ray_address_file() == Path("/tmp/ray/ray_current_cluster")


def test_auto_reads_the_file_under_ray_tmpdir(monkeypatch, tmp_path, listening, dead):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    with pytest.raises(InputError, match=f"{tmp_path}/ray/ray_current_cluster does not exist"):
        check_ray_address("auto")
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(dead + "\n")
    with pytest.raises(InputError, match="simulation.ray_address") as raised:
        check_ray_address("auto", timeout=5)
    assert dead in str(raised.value)
    (tmp_path / "ray" / "ray_current_cluster").write_text(listening + "\n")
    check_ray_address("auto", timeout=5)


def test_ray_address_wins_for_auto(monkeypatch, tmp_path, listening, dead):
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # no file there
    monkeypatch.setenv("RAY_ADDRESS", listening)
    check_ray_address("auto", timeout=5)
    monkeypatch.setenv("RAY_ADDRESS", dead)
    with pytest.raises(InputError, match=dead):
        check_ray_address("auto", timeout=5)
