"""The audit store of an honest-but-curious server, its integrity check and the run report
(``report.json``, ``tallies.csv``, figures and the self-contained ``report.html``).

See ``docs/audit-store.md`` for the schema, how to read a store while a run goes, and the
guarantees. Importing this package does not import torch or matplotlib.
"""

from fedpriv.audit.errors import StoreError
from fedpriv.audit.html_report import render_report_html
from fedpriv.audit.reader import StoreReader
from fedpriv.audit.records import UpdateRecord
from fedpriv.audit.report import build_report, report_run, write_report
from fedpriv.audit.store import DB_NAME, TENSOR_DIR, AuditStore
from fedpriv.audit.verify import Problem, check_intact, verify
from fedpriv.audit.watch import watch_reports

__all__ = [
    "DB_NAME",
    "TENSOR_DIR",
    "AuditStore",
    "Problem",
    "StoreError",
    "StoreReader",
    "UpdateRecord",
    "build_report",
    "check_intact",
    "render_report_html",
    "report_run",
    "verify",
    "watch_reports",
    "write_report",
]
