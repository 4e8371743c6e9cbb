"""A store on a read-only file system, or in a directory the user cannot write, is readable:
``fedpriv report --out`` elsewhere works; ``fedpriv report`` into it, ``fedpriv audit`` and
``fedpriv simulate --resume`` exit 2 with one line naming it before any work."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cli_support import run_cli
from store_support import make_store


@pytest.fixture
def readonly_run(tmp_path):
    """A store seen through a read-only bind mount; always unmounted."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only bind mount needs root and mount(8)")
    source, view = tmp_path / "source", tmp_path / "view"
    make_store(source / "run")
    view.mkdir()
    done = subprocess.run(["mount", "--bind", str(source), str(view)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"mount --bind is not permitted here: {done.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], check=True)
        before = sorted(p.name for p in (source / "run").iterdir())
        yield view / "run"
        assert sorted(p.name for p in (source / "run").iterdir()) == before  # nothing written
    finally:
        subprocess.run(["umount", str(view)], check=True)


def _one_line(err, command, needle):
    [line] = err.strip().splitlines()
    assert line.startswith(f"fedpriv {command}: error: ") and needle in line, line
    return line


def test_report_of_a_read_only_store_to_another_out_works(readonly_run, tmp_path, capsys):
    code, report, err = run_cli(capsys, "report", str(readonly_run), "--out",
                                str(tmp_path / "out"), "--json")
    assert code == 0, err
    assert report["integrity"]["ok"] and report["rounds"] == 1
    assert (tmp_path / "out" / "report.html").is_file()


def test_report_into_a_read_only_store_exits_2(readonly_run, capsys):
    code, _, err = run_cli(capsys, "report", str(readonly_run))
    assert code == 2
    _one_line(err, "report", "--out DIR")


def test_audit_of_a_read_only_store_exits_2_before_attacking(readonly_run, capsys, monkeypatch):
    import workflows.offline_audit

    def no_attacks(*args, **kwargs):
        raise AssertionError("an attack ran on a store it could not write")

    monkeypatch.setattr(workflows.offline_audit, "run_attacks", no_attacks)
    code, _, err = run_cli(capsys, "audit", str(readonly_run), "--iterations", "1")
    assert code == 2
    _one_line(err, "audit", f"{readonly_run}: cannot be written")


def test_resume_of_a_read_only_store_exits_2_before_work(readonly_run, capsys, monkeypatch):
    import workflows.simulation

    def no_ray(*args, **kwargs):
        raise AssertionError("the simulation started on a store it could not write")

    monkeypatch.setattr(workflows.simulation, "_run_on_ray", no_ray)
    code, _, err = run_cli(capsys, "simulate", "--resume", str(readonly_run))
    assert code == 2
    _one_line(err, "simulate", f"{readonly_run}: cannot be written")


def _as_nobody(*argv):
    """``fedpriv ARGV`` in a forked child switched to the user ``nobody`` (every module it
    needs imported beforehand: nobody may not read this interpreter's files); its exit code
    and stderr."""
    import fedpriv.audit.report  # noqa: F401 - the modules report and audit import lazily
    import workflows.offline_audit  # noqa: F401
    from workflows.cli.main import main

    with tempfile.TemporaryFile("w+") as err:
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                sys.stderr, sys.stdout = err, open(os.devnull, "w")  # noqa: SIM115
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                code = main(list(argv))
            finally:
                err.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        err.seek(0)
        return os.waitstatus_to_exitcode(status), err.read()


def test_a_store_the_user_cannot_write_is_reported_elsewhere_and_not_audited():
    """Another user's store (readable, not writable) read by ``nobody``: ``report --out`` to
    a directory of its own works, ``audit`` and ``report`` into the store exit 2 in one line
    before any work."""
    if os.geteuid() != 0:
        pytest.skip("switching to another user needs root")
    top = Path(tempfile.mkdtemp(prefix="fedpriv-test-"))  # pytest's own is private to root
    try:
        run = make_store(top / "run")
        for path in [top, *run.rglob("*"), run]:
            path.chmod(0o755 if path.is_dir() else 0o644)  # readable by all, written by root
        (top / "out").mkdir()
        os.chown(top / "out", 65534, 65534)
        code, err = _as_nobody("report", str(run), "--out", str(top / "out"))
        assert code == 0, err
        assert (top / "out" / "report.json").stat().st_uid == 65534
        code, err = _as_nobody("audit", str(run), "--iterations", "1")
        assert code == 2, err
        _one_line(err, "audit", f"{run}: cannot be written")
        code, err = _as_nobody("report", str(run))
        assert code == 2, err
        _one_line(err, "report", "--out DIR")
    finally:
        shutil.rmtree(top)
