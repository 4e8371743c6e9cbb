"""Failure messages as one readable line: what the store, the report and the log keep.

Flower's error replies carry whatever the client's exception said: in simulation
(``vce_api``) ``"<class 'T'>:<'message'>"``, and under Ray ``message`` is a Ray task error —
the whole remote traceback, coloured with terminal escape codes. :func:`failure_line` keeps
the exception's type and its last meaningful line, without escape codes, in at most
:data:`MAX_FAILURE` characters. Written by hand: neither Flower nor Ray offers the inverse of
their formatting.
"""

from __future__ import annotations

import logging
import re

__all__ = [
    "MAX_FAILURE", "REPEATS_NOTE", "FirstSeen", "collapse_failures", "failure_line",
    "log_first", "message_pattern", "round_ranges", "strip_ansi",
]

#: Longest failure message kept (characters, the ellipsis included).
MAX_FAILURE = 500

# ECMA-48 escape sequences: CSI (ESC [ ... final byte), OSC (ESC ] ... BEL/ST), two-byte ones.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_FLOWER = re.compile(r"^<class '([^']+)'>:<'(.*)'>$", re.DOTALL)  # flwr vce_api's Error.reason
_TYPED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)"
                    r"(?:\([\w.]+\))?): ?(.*)$")
_WRAPPERS = ("ClientAppException", "RayTaskError", "RayActorError")
_FLOWER_WRAP = re.compile(r"^Exception ClientAppException occurred\. Message: ?")
_NOISE = ("Traceback ", "File ", "During handling", "The above exception", "^", "~", "ray::")


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (colours, cursor moves)."""
    return _ANSI.sub("", text)


def _short(name: str) -> str:
    """``ray.exceptions.RayTaskError(X)`` → ``RayTaskError(X)``."""
    head, _, inner = name.partition("(")
    return head.rsplit(".", 1)[-1] + (f"({inner}" if inner else "")


def _meaningful(lines: list[str]) -> list[str]:
    return [line for line in (raw.strip() for raw in lines)
            if line and not line.startswith(_NOISE)]


def failure_line(text: str, limit: int = MAX_FAILURE) -> str:
    """One readable line of a failure: ``"Type: message"`` where a type is known.

    The type and message are those of the innermost exception the text names that is not a
    wrapper (Flower's ``ClientAppException``, Ray's task errors), else of the last line that
    names a type, else the text's last meaningful line with the outer type of a Flower error
    reply. Escape codes are removed and the result is cut to ``limit`` characters.

    Examples
    --------
    >>> failure_line("<class 'KeyError'>:<''fedpriv-config''>")
    "KeyError: 'fedpriv-config'"
    """
    text = strip_ansi(str(text))
    outer = None
    match = _FLOWER.match(text.strip())
    if match:
        outer, text = _short(match.group(1)), match.group(2)
    lines = _meaningful([_FLOWER_WRAP.sub("", line.strip()) for line in text.splitlines()])
    typed = [m for m in map(_TYPED.match, lines) if m]
    inner = [m for m in typed if not _short(m.group(1)).startswith(_WRAPPERS)]
    if inner or typed:
        found = (inner or typed)[-1]
        kind, message = _short(found.group(1)), found.group(2).strip()
    else:
        kind, message = outer, lines[-1] if lines else ""
    line = f"{kind}: {message}" if kind and message else (kind or message or "(no message)")
    return line if len(line) <= limit else line[: limit - 1] + "…"


# A number in a message (values, p-values, norms): what changes from round to round.
_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def message_pattern(message: str) -> str:
    """``message`` with every number replaced by ``#``: the failure it describes, the same
    from one round to the next (``"‖u‖₂ = 185.3 is too small"`` → ``"‖u‖₂ = # is too small"``)."""
    return _NUMBER.sub("#", message)


class FirstSeen:
    """Which failures were already logged: :meth:`first` is true once per
    ``(subject, kind, message pattern)``, so a failure that repeats every round is logged in
    its first round and summarised at the end (:func:`collapse_failures`)."""

    def __init__(self) -> None:
        self._seen: set[tuple[object, str, str]] = set()

    def first(self, subject: object, kind: str, message: str) -> bool:
        key = (subject, kind, message_pattern(message))
        if key in self._seen:
            return False
        self._seen.add(key)
        return True


#: Said after a failure's first log line: its repeats are summarised at the end.
REPEATS_NOTE = " (not logged again when it repeats: the summary at the end counts the rounds)"


def log_first(log: logging.Logger, seen: FirstSeen, subject: object, kind: str, message: str,
              fmt: str, *args: object, level: int = logging.WARNING) -> None:
    """Log ``fmt % args`` at ``level`` the first time ``(subject, kind, message)`` is
    :meth:`seen <FirstSeen.first>`, at DEBUG when it repeats."""
    if seen.first(subject, kind, message):
        log.log(level, fmt + "%s", *args, REPEATS_NOTE)
    else:
        log.debug(fmt, *args)


def round_ranges(rounds: list[int]) -> str:
    """``[1, 2, 3, 5]`` → ``"1–3, 5"``."""
    spans: list[list[int]] = []
    for r in sorted(set(rounds)):
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)


def collapse_failures(failures: list[dict]) -> list[dict]:
    """One entry per distinct failure — the same client, node, kind and message up to its
    numbers (:func:`message_pattern`) — in order of first occurrence: the first round's
    failure with ``rounds``, every round it occurred in."""
    groups: dict[tuple[object, ...], dict] = {}
    for f in failures:
        key = (f.get("client_id"), f.get("node_id"), f.get("kind"),
               message_pattern(str(f.get("message", ""))))
        if key in groups:
            groups[key]["rounds"].append(f["round"])
        else:
            groups[key] = {**f, "rounds": [f["round"]]}
    return list(groups.values())
