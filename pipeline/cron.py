"""The schedules Argo's CronWorkflow accepts, checked before a workflow is rendered.

Argo parses `spec.schedules` with robfig/cron v3's standard parser: five fields, or a descriptor. The rules below
are that parser's (bounds, names, `*`/`?`, lists, ranges, steps), so a schedule refused here is one the Argo
controller would refuse, after the objects were applied.
"""

from __future__ import annotations

import re

EXAMPLE = (
    'five fields "minute hour day-of-month month day-of-week", e.g. "0 3 * * *" (daily 03:00) or "30 4 * * 1-5"'
    " (04:30 on weekdays); or @hourly, @daily, @weekly, @monthly, @yearly, @every 6h"
)

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# (name, lowest, highest, names): robfig/cron's bounds; day of week is 0-6 (7 is refused there).
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {m: i for i, m in enumerate(_MONTHS, 1)}),
    ("day of week", 0, 6, {d: i for i, d in enumerate(_DAYS)}),
)
_DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_DIGITS = re.compile(r"[0-9]+")
# Go's time.ParseDuration, which `@every` takes.
_DURATION = re.compile(r"(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def problem(schedule: str) -> str | None:
    """Why Argo would refuse `schedule` (None: it accepts it)."""
    text = schedule.strip()
    if text.startswith("@every "):
        duration = text.removeprefix("@every ").strip()
        return (
            None if _is_duration(duration) else f"@every takes a duration such as 6h or 90m, not {duration!r}"
        )
    if text.startswith("@"):
        return None if text in _DESCRIPTORS else f"{text!r} is not a descriptor ({', '.join(_DESCRIPTORS)})"
    fields = text.split()
    if len(fields) != len(_FIELDS):
        return f"{len(fields)} field(s), not 5"
    for value, (name, low, high, names) in zip(fields, _FIELDS, strict=True):
        for part in value.split(","):
            why = _part_problem(part, low, high, names)
            if why:
                return f"{name} {value!r}: {why}"
    return None


def _part_problem(part: str, low: int, high: int, names: dict[str, int]) -> str | None:
    span, slash, step = part.partition("/")
    # Go's strconv.Atoi: ASCII digits only (str.isdigit also takes "²" and "٣"); "*/" has an empty step.
    if slash and not (_DIGITS.fullmatch(step) and int(step) > 0):
        return f"step {step!r} is not a positive whole number"
    if span in ("*", "?"):
        return None
    first, dash, last = span.partition("-")
    values = []
    for bound in (first, last) if dash else (first,):
        value = (
            names.get(bound.lower()) if bound.isalpha() else int(bound) if _DIGITS.fullmatch(bound) else None
        )
        if value is None:
            return f"{bound!r} is not a number{' or a name' if names else ''}"
        if not low <= value <= high:
            return f"{value} is outside {low}-{high}"
        values.append(value)
    if values[0] > values[-1]:
        return f"range {span!r} runs backwards"
    return None


def _is_duration(text: str) -> bool:
    return bool(text) and _DURATION.sub("", text) == "" and _DURATION.match(text) is not None
