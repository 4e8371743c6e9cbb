"""The audit store of an honest-but-curious server, its integrity check and the run report
(``report.json``, ``tallies.csv``, figures and the self-contained ``report.html``).

See ``docs/audit-store.md`` for the schema, how to read a store while a run goes, and the
guarantees. Importing this package does not import torch or matplotlib, and its names are
imported on first use (:mod:`fedpriv.lazy`): a light submodule (``fedpriv.audit.vacuity``, the
``[audit]`` section) does not import the report, the leakage estimators and scipy with it.
"""

from typing import TYPE_CHECKING

from fedpriv.lazy import lazy_exports

if TYPE_CHECKING:
    from fedpriv.audit.errors import StoreError
    from fedpriv.audit.html_report import render_report_html
    from fedpriv.audit.reader import DB_NAME, TENSOR_DIR, StoreReader
    from fedpriv.audit.records import UpdateRecord
    from fedpriv.audit.report import build_report, report_run, write_report
    from fedpriv.audit.store import AuditStore
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

__getattr__ = lazy_exports(__name__, {
    "DB_NAME": "reader", "TENSOR_DIR": "reader", "AuditStore": "store", "Problem": "verify",
    "check_intact": "verify", "verify": "verify",
    "StoreError": "errors", "StoreReader": "reader", "UpdateRecord": "records",
    "build_report": "report", "render_report_html": "html_report", "report_run": "report",
    "watch_reports": "watch",
    "write_report": "report",
})
