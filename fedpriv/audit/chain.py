"""The audit record's hash chain: every row the audit writes, in write order.

Each write of a chained row (an insert, an update in place, a deletion) appends one entry to
the ``chain`` table in the same transaction: the entry's digest is the SHA-256 of the row's
canonical bytes (:func:`canonical`) as the database holds it after the write, and its head is
``SHA-256(previous head ‖ digest)`` over the raw 32-byte values, starting from 32 zero bytes.
A tensor file enters through its ``tensors`` row, which records the file's SHA-256. The last
head commits to the whole record; a head that leaves the run directory (printed, signed:
:mod:`fedpriv.audit.signing`) detects a record rewritten and re-chained by someone with write
access. :func:`chain_breaks` recomputes every head and checks that each current row equals its
last chained version and that no chained row is missing. The encoding is documented in
``docs/audit-store.md`` ("The hash chain") so that another implementation can recompute it.
"""

from __future__ import annotations

import binascii
import hashlib
import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHAINED", "GENESIS", "ChainBreak", "Entry", "PendingChain", "append", "append_deletions",
    "append_many", "canonical",
    "chain_breaks", "chain_heads", "entry_digest", "final_head", "next_head", "round_heads",
]

#: The chained tables and the columns that identify a row of each (the entry's key).
CHAINED: dict[str, tuple[str, ...]] = {
    "runs": ("run_id",), "rounds": ("round",), "tensors": ("tensor_id",),
    "globals": ("round",), "aggregates": ("round",), "updates": ("update_id",),
    "ground_truth": ("round", "client_id"), "tallies": ("round", "client_id"),
    "attacks": ("attack_id",), "memory": ("round", "client_id", "kind"),
    "failures": ("failure_id",),
}  # fmt: skip
#: The chained tables whose rows name a client.
_PER_CLIENT = frozenset({"updates", "ground_truth", "tallies", "attacks", "memory", "failures"})
#: The head before the first entry: 32 zero bytes, in hex.
GENESIS = "0" * 64


def _hex(value: Any) -> str:
    """A BLOB's text in the canonical encoding: lowercase hex."""
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"{type(value).__name__} is not a column value")


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                              default=_hex, check_circular=False)
"""The canonical encoder, built once (not once per entry as ``json.dumps`` with options
does); a row holds no containers, so skipping the cycle bookkeeping changes no byte."""


def _json(value: Any) -> str:
    return _CANONICAL.encode(value)


def canonical(table: str, key: Sequence[Any], row: Mapping[str, Any] | None) -> bytes:
    """The bytes an entry hashes: the JSON array ``[table, key, row]`` with sorted keys, no
    spaces, ASCII only; ``row`` maps every column to its stored value (floats as Python's
    ``repr``, ±∞ as ``Infinity``, NULL as ``null``, a BLOB as lowercase hex), or is ``null``
    for a deleted row."""
    return _json([table, list(key), row]).encode("ascii")


_EMPTY_STATE = b'"state":""'
"""A ``memory`` row's ``state`` in :func:`canonical`, emptied (:func:`_digest`)."""


def _digest(table: str, key: Sequence[Any], row: Mapping[str, Any] | None) -> bytes:
    """Raw SHA-256 of :func:`canonical`. A ``memory`` row's ``state`` (a BLOB of kilobytes,
    the audit's memory of a client-round) is hashed as the hex digits it encodes to, which JSON
    leaves as they are, around the text of the row with it emptied: not built into the text
    and scanned again by the encoder (most of the entry's cost). Within the text a ``"`` of a
    string is escaped, so ``"state":""`` is there once, as that column."""
    state = row.get("state") if table == "memory" and row is not None else None
    if type(state) is bytes:
        text = canonical(table, key, {**row, "state": ""})
        if text.count(_EMPTY_STATE) == 1:
            before, _, after = text.partition(_EMPTY_STATE)
            digest = hashlib.sha256(before)
            for part in (b'"state":"', binascii.hexlify(state), b'"', after):
                digest.update(part)
            return digest.digest()
    return hashlib.sha256(canonical(table, key, row)).digest()


def entry_digest(table: str, key: Sequence[Any], row: Mapping[str, Any] | None) -> str:
    """Hex SHA-256 of :func:`canonical`."""
    return _digest(table, key, row).hex()


def next_head(head: str, digest: str) -> str:
    """Hex ``SHA-256(head ‖ digest)`` of the two raw 32-byte values."""
    return hashlib.sha256(bytes.fromhex(head) + bytes.fromhex(digest)).hexdigest()


def final_head(conn: sqlite3.Connection) -> tuple[int, str]:
    """``(entries, head)`` of the chain as committed (``(0, GENESIS)`` when empty)."""
    row = conn.execute("SELECT seq, head FROM chain ORDER BY seq DESC LIMIT 1").fetchone()
    return (0, GENESIS) if row is None else (row[0], row[1])


def _where(table: str) -> str:
    return " AND ".join(f"{column} = ?" for column in CHAINED[table])


def _insert(conn: sqlite3.Connection, table: str, key: Sequence[Any],
            row: Mapping[str, Any] | None, locator: Mapping[str, Any]) -> None:
    digest = entry_digest(table, key, row)
    head = next_head(final_head(conn)[1], digest)
    conn.execute(
        "INSERT INTO chain (tbl, key_json, round, client_id, digest, head) VALUES (?, ?, ?, ?, "
        "?, ?)", (table, _json(list(key)), locator.get("round"), locator.get("client_id"),
                  digest, head))


def append(conn: sqlite3.Connection, table: str, key: Sequence[Any]) -> None:
    """Chain the row of ``table`` identified by ``key`` as it stands now, inside the
    transaction that wrote it."""
    row = dict(conn.execute(f"SELECT * FROM {table} WHERE {_where(table)}", tuple(key)).fetchone())
    _insert(conn, table, key, row, row)


_KEYS_PER_SELECT = 250
"""Rows read back by one ``SELECT`` of :func:`append_many` (well under SQLite's limit of
bound parameters, with three key columns)."""


def _rows(conn: sqlite3.Connection, table: str, keys: list[tuple]) -> dict[tuple, dict]:
    """The rows of ``table`` with these keys, as they stand now, by key."""
    columns, out = CHAINED[table], {}
    for start in range(0, len(keys), _KEYS_PER_SELECT):
        part = keys[start:start + _KEYS_PER_SELECT]
        if len(columns) == 1:
            sql = f"SELECT * FROM {table} WHERE {columns[0]} IN ({', '.join('?' * len(part))})"
            values: list[Any] = [k[0] for k in part]
        else:  # each key looked up in the key's index: `(a, b) IN (VALUES …)` scans the table
            one = f"({', '.join('?' * len(columns))})"
            on = " AND ".join(f"t.{c} = k.column{i + 1}" for i, c in enumerate(columns))
            sql = (f"SELECT t.* FROM (VALUES {', '.join([one] * len(part))}) AS k "
                   f"CROSS JOIN {table} AS t ON {on}")
            values = [v for k in part for v in k]
        for found in conn.execute(sql, values):
            row = dict(found)
            out[tuple(row[c] for c in columns)] = row
    return out


Entry = tuple[str, tuple, Mapping[str, Any] | None]
"""A pending chain entry: ``(table, key, row)``, ``row`` the row as the database holds it
after the write when the writer knows it (:mod:`fedpriv.audit.stored_rows`), else None (read
back when the entry is written)."""


def append_many(conn: sqlite3.Connection, entries: Sequence[Entry]) -> None:
    """:func:`append` of every ``(table, key, row)`` in order, inside the transaction that
    wrote them: the same entries, in the same order, with the same heads, as one :func:`append`
    each — but the rows not given read back by a few ``SELECT`` statements per table, the heads
    chained in memory (raw bytes) from the committed head once, and the entries inserted by one
    ``executemany``. Each row must stand as it was written (no write to it since:
    :class:`PendingChain`)."""
    if not entries:
        return
    wanted: dict[str, dict[tuple, None]] = {}
    for table, key, row in entries:
        if row is None:
            wanted.setdefault(table, {})[key] = None
    rows = {table: _rows(conn, table, list(keys)) for table, keys in wanted.items()}
    head, values, sha256 = bytes.fromhex(final_head(conn)[1]), [], hashlib.sha256
    for table, key, known in entries:
        row = rows[table][key] if known is None else known
        digest = _digest(table, key, row)
        head = sha256(head + digest).digest()
        values.append((table, _json(list(key)), row.get("round"), row.get("client_id"),
                       digest.hex(), head.hex()))
    conn.executemany("INSERT INTO chain (tbl, key_json, round, client_id, digest, head) VALUES "
                     "(?, ?, ?, ?, ?, ?)", values)


class PendingChain:
    """The chain entries of one store batch, written together (:func:`append_many`) when the
    batch ends — or earlier, before a row with a pending entry is written again, so that every
    entry still hashes its row as that write left it."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._keys: set[tuple[str, tuple]] = set()

    def add(self, table: str, key: Sequence[Any]) -> None:
        """Chain this row (just written) when the batch ends, as it stands then."""
        self.extend([(table, tuple(key), None)])

    def extend(self, entries: Sequence[Entry]) -> None:
        """Chain these rows (just written), in this order, when the batch ends: each as given,
        or as it stands then where not given."""
        self.entries.extend(entries)
        self._keys.update((table, key) for table, key, _ in entries)

    def before_writes(self, conn: sqlite3.Connection, rows: Iterable[tuple[str, tuple]]) -> None:
        """Called before writes to rows named by ``(table, key)``: flush if an entry of one
        of them is pending."""
        if not self._keys.isdisjoint(rows):
            self.flush(conn)

    def flush(self, conn: sqlite3.Connection) -> None:
        """Write the pending entries now."""
        entries, self.entries, self._keys = self.entries, [], set()
        append_many(conn, entries)


def append_deletions(conn: sqlite3.Connection, rounds: Sequence[int]) -> None:
    """Chain the deletion of every row of ``rounds`` (before the ``DELETE``, in the same
    transaction): the children of a round first, its ``rounds`` row last."""
    marks = ", ".join("?" * len(rounds))
    for table in [*(t for t in CHAINED if t not in ("runs", "rounds")), "rounds"]:
        client = ["client_id"] if table in _PER_CLIENT else []
        columns = ", ".join(dict.fromkeys([*CHAINED[table], "round", *client]))
        order = ", ".join(CHAINED[table])
        for row in conn.execute(f"SELECT {columns} FROM {table} WHERE round IN ({marks}) "
                                f"ORDER BY {order}", tuple(rounds)).fetchall():
            locator = dict(row)
            _insert(conn, table, [locator[c] for c in CHAINED[table]], None, locator)


def round_heads(conn: sqlite3.Connection) -> dict[int, str]:
    """Each completed round's head: the chain's head when the round was marked complete."""
    rows = conn.execute(
        "SELECT c.round, c.head FROM chain c JOIN rounds r ON r.round = c.round AND r.status = "
        "'completed' WHERE c.tbl = 'rounds' AND c.seq = (SELECT MAX(seq) FROM chain WHERE tbl "
        "= 'rounds' AND round = c.round) ORDER BY c.round").fetchall()
    return {row[0]: row[1] for row in rows}


def chain_heads(conn: sqlite3.Connection) -> dict[str, Any]:
    """The chain's summary for the report: ``head``, ``entries`` and ``rounds`` (each
    completed round's head, by round number as text)."""
    entries, head = final_head(conn)
    rounds = {str(r): h for r, h in round_heads(conn).items()}
    return {"head": head, "entries": entries, "rounds": rounds}


@dataclass(frozen=True)
class ChainBreak:
    """One way the record differs from its chain; ``seq`` is the chain entry concerned (None
    for a row the chain never saw)."""

    seq: int | None
    table: str
    key: tuple[Any, ...]
    round: int | None
    client_id: int | None
    message: str

    def __str__(self) -> str:
        if self.table not in CHAINED:
            return f"chain entry {self.seq}: {self.message}"
        key = dict(zip(CHAINED[self.table], self.key, strict=False))  # as the chain names it
        where = [f"{self.table} row {key}"]
        where += [] if self.round is None else [f"round {self.round}"]
        where += [] if self.client_id is None else [f"client {self.client_id}"]
        return f"{', '.join(where)}: {self.message}"


def _replay(conn: sqlite3.Connection) -> tuple[dict, list[ChainBreak], list[str]]:
    """Recompute every head; the last entry of each row, the first break of the chain itself
    (nothing after it can be trusted) and every head, in order."""
    last: dict[tuple[str, str], sqlite3.Row] = {}
    heads, head = [], GENESIS
    rows = conn.execute("SELECT seq, tbl, key_json, round, client_id, digest, head FROM chain "
                        "ORDER BY seq")
    for expected_seq, entry in enumerate(rows, start=1):
        try:
            head = next_head(head, entry["digest"])
        except (TypeError, ValueError):
            head = None
        if entry["seq"] != expected_seq or entry["tbl"] not in CHAINED or head != entry["head"]:
            what = ("does not follow from the entry before it (the chain was edited, an entry "
                    "removed or reordered)")
            return last, [ChainBreak(entry["seq"], "chain", (entry["seq"],), entry["round"],
                                     entry["client_id"], what)], heads
        heads.append(head)
        last[(entry["tbl"], entry["key_json"])] = entry
    return last, [], heads


def chain_breaks(conn: sqlite3.Connection) -> tuple[list[ChainBreak], list[str]]:
    """Every break of the record against its chain, first in write order first (rows the
    chain never saw last), and the recomputed head of every entry (empty when the chain itself
    is broken). Read inside one transaction for a consistent view."""
    last, breaks, heads = _replay(conn)
    if breaks:
        return breaks, []
    for table, columns in CHAINED.items():
        for found in conn.execute(f"SELECT * FROM {table}"):
            row = dict(found)
            key = [row[c] for c in columns]
            entry = last.pop((table, _json(key)), None)
            locator = (table, tuple(key), row.get("round"), row.get("client_id"))
            if entry is None:
                breaks.append(ChainBreak(None, *locator, "not in the chain (written outside "
                                         "the audit)"))
            elif entry["digest"] != entry_digest(table, key, row):
                breaks.append(ChainBreak(entry["seq"], *locator, "differs from its last "
                                         f"chained version (chain entry {entry['seq']})"))
    for (table, key_json), entry in last.items():
        key = json.loads(key_json)
        if entry["digest"] != entry_digest(table, key, None):
            breaks.append(ChainBreak(entry["seq"], table, tuple(key), entry["round"],
                                     entry["client_id"], "missing: chained (chain entry "
                                     f"{entry['seq']}) but no longer in the database"))
    breaks.sort(key=lambda b: (b.seq is None, b.seq or 0))
    return breaks, heads
