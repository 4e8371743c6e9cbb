"""dp-accounting's warnings print once per process, and do not make every other log line print
twice (absl, its logger, configures the root logger when that has no handler)."""

import logging
import subprocess
import sys

from fedpriv.accounting import dp_library

ORDERS = [1.1, 1.2, 1.3, 8.0]  # the low orders do not converge at q = 0.22, σ = 1


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_each_warning_is_logged_once(monkeypatch):
    """(A handler on the module's own logger: a ServerApp run earlier in this process may have
    stopped fedpriv's loggers from propagating to pytest's; and absl's level as dp-accounting
    leaves it: the command line, run in process by earlier tests, raises it to ERROR.)"""
    monkeypatch.setattr(dp_library, "_WARNED", set())
    seen, absl = _Records(), _Records()
    absl_logger = logging.getLogger("absl")
    level = absl_logger.level
    absl_logger.setLevel(logging.NOTSET)  # setLevel, not the attribute: it clears the caches
    dp_library.log.addHandler(seen)
    absl_logger.addHandler(absl)
    try:
        for q in (0.222222, 0.223776):
            dp_library.gaussian_subsampled_rdp(ORDERS, 1.0, q)
    finally:
        dp_library.log.removeHandler(seen)
        absl_logger.removeHandler(absl)
        absl_logger.setLevel(level)
    assert len(seen.records) == 1 and "failed to converge" in seen.records[0].getMessage()
    assert len(absl.records) == 6  # dp-accounting warned 6 times (3 orders at 2 rates)


def test_the_root_logger_is_left_without_a_handler():
    code = ("import logging\nfrom fedpriv.accounting.dp_library import gaussian_subsampled_rdp\n"
            f"gaussian_subsampled_rdp({ORDERS}, 1.0, 0.222222)\n"
            "print(len(logging.getLogger().handlers))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "0"
    assert out.stderr.count("failed to converge") == 1  # Python's last-resort handler, once
