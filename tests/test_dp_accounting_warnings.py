"""dp-accounting's warnings print once per process, and do not make every other log line print
twice (absl, its logger, configures the root logger when that has no handler)."""

import logging
import subprocess
import sys

from fedpriv.accounting import dp_library

ORDERS = [1.1, 1.2, 1.3, 8.0]  # the low orders do not converge at q = 0.22, σ = 1


def test_each_warning_is_logged_once(caplog, monkeypatch):
    monkeypatch.setattr(dp_library, "_WARNED", set())
    with caplog.at_level(logging.WARNING):
        for q in (0.222222, 0.223776):
            dp_library.gaussian_subsampled_rdp(ORDERS, 1.0, q)
    assert [r.name for r in caplog.records] == ["fedpriv.accounting.dp_library"]
    assert "failed to converge" in caplog.records[0].getMessage()


def test_the_root_logger_is_left_without_a_handler():
    code = ("import logging\nfrom fedpriv.accounting.dp_library import gaussian_subsampled_rdp\n"
            f"gaussian_subsampled_rdp({ORDERS}, 1.0, 0.222222)\n"
            "print(len(logging.getLogger().handlers))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "0"
    assert out.stderr.count("failed to converge") == 1  # Python's last-resort handler, once
