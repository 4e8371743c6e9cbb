"""The audit store of an honest-but-curious server, its integrity check and the run report.

See ``docs/audit-store.md`` for the schema, how to read a store while a run goes, and the
guarantees. Importing this package does not import torch or matplotlib.
"""

from fedpriv.audit.errors import StoreError
from fedpriv.audit.reader import StoreReader
from fedpriv.audit.records import UpdateRecord
from fedpriv.audit.report import build_report, report_run, write_report
from fedpriv.audit.store import DB_NAME, TENSOR_DIR, AuditStore
from fedpriv.audit.verify import Problem, verify

__all__ = [
    "DB_NAME",
    "TENSOR_DIR",
    "AuditStore",
    "Problem",
    "StoreError",
    "StoreReader",
    "UpdateRecord",
    "build_report",
    "report_run",
    "verify",
    "write_report",
]
