"""Reviewed waivers (policies/waivers.yaml): who accepted which finding, on which stacks and resources,
why, and until when.

The same file and code are applied in two places: by the offline gate (policies.analyze, after the
Analyzer run) and inside the pack under `pulumi preview --policy-pack policies` (policies.pack), where
a waived finding is reported as advisory instead of blocking.
"""

from __future__ import annotations

import datetime as dt
import difflib
import fnmatch
import hashlib
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

WAIVERS_FILE = Path(__file__).with_name("waivers.yaml")
TOP_LEVEL = ("waivers",)
REQUIRED = ("rule", "finding", "stacks", "resources", "justification", "approver", "expires")
# What a waiver accepts: a check that cannot decide at preview (a value unknown until it exists), or a
# violation the reviewer accepts as it is. One never stands for the other: a waiver written because the
# value is unknown must not also hide the same rule's real violation once the value is known.
FINDINGS = ("undetermined", "violation")
# Who accepted the risk must be reachable: a name alone ('TODO', 'me', ' ') is no owner.
_CONTACT = re.compile(r"\S.*<[^<>@\s]+@[^<>@\s]+\.[^<>@\s]+>")
_TEXT = {
    "justification": "why the risk is accepted and what compensates for it",
    "approver": "'Name <email>' of the person accountable",
}
MAX_VALIDITY = dt.timedelta(days=366)  # one year ahead (a leap day included): a waiver is re-reviewed yearly


def utc_today() -> dt.date:
    """The day waivers are judged on when none is given: today in UTC, whatever the machine's zone. A waiver
    holds through its `expires` day in UTC (until 23:59:59 UTC). date.today() is the local date: a CI runner in
    UTC and a laptop in Europe/Madrid disagreed for an hour or two around midnight on whether a waiver held.
    promotion/evidence.py has the same function (the training image ships no policies/): the gate and the pack
    must agree to the day. Read off time.time(), as date.today() is, so one fixed clock in a test governs both."""
    return dt.datetime.fromtimestamp(time.time(), dt.UTC).date()


class _Loader(yaml.SafeLoader):
    """SafeLoader that leaves dates as written: PyYAML turns `expires: 2026-02-30` into a bare ValueError
    ("day is out of range") that names neither the file nor the entry; parse() names both."""


_Loader.add_constructor("tag:yaml.org,2002:timestamp", lambda loader, node: loader.construct_scalar(node))


def _mapping_without_duplicates(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    """YAML keeps the last of two equal keys in silence: an entry given a second `expires:` (or `resources:`)
    by an edit was signed with one value and applied with the other."""
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        try:
            hash(key)
        except TypeError:
            # `? [a, b]`: construct_mapping refuses it with its line ("found unhashable key"); looking it up
            # here first ended the run in a bare TypeError instead.
            continue
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"key {key!r} is given twice in one mapping (first on line {seen[key] + 1}); keep one",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


class WaiverError(ValueError):
    """A waiver entry is incomplete or malformed; the message names the entry and the fix."""


@dataclass(frozen=True)
class Waiver:
    rule: str
    finding: str
    stacks: tuple[str, ...]
    resources: tuple[str, ...]
    justification: str
    approver: str
    expires: dt.date
    index: int = field(default=0, compare=False)

    def active(self, today: dt.date) -> bool:
        return today <= self.expires

    def matches(self, rule: str, urn: str, stack: str, undetermined: bool) -> bool:
        if rule != self.rule or stack not in self.stacks:
            return False
        if self.finding != ("undetermined" if undetermined else "violation"):
            return False
        return any(pattern_matches(p, urn) for p in self.resources)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.index,
            "rule": self.rule,
            "finding": self.finding,
            "stacks": list(self.stacks),
            "resources": list(self.resources),
            "justification": self.justification,
            "approver": self.approver,
            "expires": self.expires.isoformat(),
        }


def refuse_unknown_keys(keys: Iterable[Any], allowed: Sequence[str], where: str) -> None:
    """A misspelt key ('waiver:', 'expiry:', 'reson:') must not load as if it were absent: a misspelt top-level
    key silently dropped every waiver, and the reviewer's fix never applied."""
    unknown = sorted(str(k) for k in keys if k not in allowed)
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, allowed, n=1)
        hints.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
    raise WaiverError(f"{where}: unknown field(s) {', '.join(hints)}; the fields it accepts: {list(allowed)}")


def pattern_matches(pattern: str, urn: str) -> bool:
    """A URN pattern (it contains '::') is matched against the URN, a name pattern against the resource name
    only: matched against the URN too, a name pattern such as '*Bucket*' or '*aws:*' waived whole types."""
    if "::" in pattern:
        return fnmatch.fnmatchcase(urn, pattern)
    return fnmatch.fnmatchcase(urn.rsplit("::", 1)[-1] if urn else "", pattern)


_WILDCARDS = frozenset("*?[")


def check_pattern(pattern: str, stacks: Sequence[str], where: str) -> None:
    """A waiver names resources, never a type or a provider. A name pattern keeps a literal part; a URN pattern
    ends in `::<type>::<name>` with the type written out: wildcards may stand for the stack, the project and the
    name, never for any part of the type (`urn:pulumi:prod::ml::aws:*` would waive every AWS resource)."""
    if not pattern.strip("*?[]:"):
        raise WaiverError(
            f"{where}: resources pattern {pattern!r} matches everything; name the resources (e.g. 'mlp-*-logs')"
        )
    if "::" not in pattern and not pattern.startswith("urn:"):
        return
    parts = pattern.split("::")
    example = "'urn:pulumi:prod::eu-ml-platform::aws:s3/bucket:Bucket::mlp-prod-*'"
    if len(parts) < 3:
        raise WaiverError(
            f"{where}: resources pattern {pattern!r} is not a URN pattern ending in ::<type>::<name>; write "
            f"one resource type out, e.g. {example}, or a name pattern (no '::')"
        )
    rtype = parts[-2]
    if not rtype or _WILDCARDS & set(rtype) or ":" not in rtype:
        raise WaiverError(
            f"{where}: resources pattern {pattern!r}: its type part {rtype!r} must be one resource type written "
            f"out, with no wildcard (wildcards only in the stack, project and name), e.g. {example}"
        )
    if parts[0].startswith("urn:pulumi:"):
        stack = parts[0].removeprefix("urn:pulumi:")
        if not _WILDCARDS & set(stack) and stack not in stacks:
            raise WaiverError(
                f"{where}: resources pattern {pattern!r} names stack {stack!r}, which is not in stacks {list(stacks)}"
            )


def _strings(value: Any, what: str, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(x, str) and x.strip() for x in items):
        raise WaiverError(f"{where}: {what} must be a non-empty string or list of strings")
    return tuple(items)


def parse(
    entries: Iterable[dict[str, Any]],
    source: str = "waivers",
    *,
    rules: Iterable[str] | None = None,
    today: dt.date | None = None,
) -> list[Waiver]:
    """Validate every entry; `rules` (the pack's rule names) and `today` enable those checks."""
    known = set(rules) if rules is not None else None
    out = []
    for n, e in enumerate(entries):
        where = f"{source}: waiver #{n + 1}"
        if not isinstance(e, dict):
            raise WaiverError(f"{where}: must be a mapping with {list(REQUIRED)}")
        # Before the missing keys: 'expiry:' is a misspelt 'expires:', and the message should say so.
        refuse_unknown_keys(e, REQUIRED, where)
        missing = [k for k in REQUIRED if not e.get(k)]
        if missing:
            raise WaiverError(f"{where} lacks {missing}; every waiver needs {list(REQUIRED)}")
        for key in ("justification", "approver"):
            if not isinstance(e[key], str) or not e[key].strip():
                raise WaiverError(f"{where}: {key}={e[key]!r}; write it as text ({_TEXT[key]})")
        if not _CONTACT.search(e["approver"]):
            raise WaiverError(
                f"{where}: approver={e['approver']!r} names no one to ask; write 'Name <email>' of the person "
                "accountable (DPD, ENS security officer)"
            )
        rule = str(e["rule"])
        if known is not None and rule not in known:
            raise WaiverError(
                f"{where}: no rule named {rule!r} in the pack (see policies/README.md for the names)"
            )
        finding = str(e["finding"])
        if finding not in FINDINGS:
            raise WaiverError(
                f"{where}: finding={finding!r}; write 'undetermined' (the value is unknown at preview) or "
                "'violation' (the known finding is accepted as it is)"
            )
        stacks = _strings(e["stacks"], "stacks", where)
        if "*" in stacks:
            raise WaiverError(f"{where}: stacks must list stack names ('*' is refused)")
        resources = _strings(e["resources"], "resources", where)
        for pattern in resources:
            check_pattern(pattern, stacks, where)
        expires = e["expires"]
        if isinstance(expires, str):
            try:
                expires = dt.date.fromisoformat(expires)
            except ValueError as err:
                raise WaiverError(f"{where}: expires={expires!r} is not a date; write YYYY-MM-DD") from err
        if not isinstance(expires, dt.date) or isinstance(expires, dt.datetime):
            raise WaiverError(f"{where}: expires={expires!r} is not a date; write YYYY-MM-DD")
        if today is not None and expires > today + MAX_VALIDITY:
            raise WaiverError(
                f"{where}: expires {expires} is more than one year after {today}; re-review it within a year"
            )
        out.append(
            Waiver(
                rule, finding, stacks, resources, str(e["justification"]), str(e["approver"]), expires, n + 1
            )
        )
    return out


def load(
    path: Path = WAIVERS_FILE, *, rules: Iterable[str] | None = None, today: dt.date | None = None
) -> list[Waiver]:
    return read(path, rules=rules, today=today)[0]


def read(
    path: Path = WAIVERS_FILE, *, rules: Iterable[str] | None = None, today: dt.date | None = None
) -> tuple[list[Waiver], str]:
    """The waivers and the sha256 of the bytes they were parsed from ("" for the pack's own file when it is
    absent): a result records which waivers judged it, so a later edit of the file makes it stale."""
    if not path.exists():
        if path == WAIVERS_FILE:  # the pack's own file may be absent: no waivers
            return [], ""
        raise WaiverError(f"{path}: no such waivers file (check --waivers)")
    try:
        raw = path.read_bytes()
        data = yaml.load(raw.decode("utf-8"), Loader=_Loader) or {}
    except (OSError, UnicodeDecodeError) as err:
        raise WaiverError(f"{path}: cannot read the waivers file ({err}); it is UTF-8 YAML") from err
    except (yaml.YAMLError, ValueError) as err:
        raise WaiverError(f"{path}: not valid YAML ({err})") from err
    if not isinstance(data, dict) or not isinstance(data.get("waivers") or [], list):
        raise WaiverError(f"{path}: expected a mapping with a 'waivers' list")
    refuse_unknown_keys(data, TOP_LEVEL, str(path))
    waivers = parse(data.get("waivers") or [], str(path), rules=rules, today=today)
    return waivers, hashlib.sha256(raw).hexdigest()


def find(
    waivers: Sequence[Waiver], rule: str, urn: str, stack: str, today: dt.date, *, undetermined: bool
) -> Waiver | None:
    return next((w for w in waivers if w.active(today) and w.matches(rule, urn, stack, undetermined)), None)


def split(
    violations: list[dict[str, Any]], waivers: Sequence[Waiver], today: dt.date, stack: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(still violations, waived ones with their waiver). Expired waivers do not apply."""
    kept, waived = [], []
    for v in violations:
        w = find(
            waivers, v["policy"], v.get("urn") or "", stack, today, undetermined=bool(v.get("undetermined"))
        )
        if w is None:
            kept.append(v)
        else:
            waived.append({**v, "waiver": w.as_dict()})
    return kept, waived


def status(
    waivers: Sequence[Waiver], waived: Iterable[dict[str, Any]], today: dt.date
) -> dict[str, list[dict[str, Any]]]:
    """Expired waivers and active ones that matched no finding (`waived`: the waived findings of every
    stack evaluated): both are for the reviewer to renew or remove."""
    used = {v["waiver"]["id"] for v in waived}
    return {
        "expired": [w.as_dict() for w in waivers if not w.active(today)],
        "unused": [w.as_dict() for w in waivers if w.active(today) and w.index not in used],
    }


def refuse_catch_alls(waivers: Sequence[Waiver], stack: str, resources: Sequence[dict[str, Any]]) -> None:
    """A waiver whose patterns match every resource of a stack it names ('*-*', 'urn:*', 'mlp-*') is a rule
    switched off, not a reviewed exception: refused, with the resources count, before any report is written."""
    urns = [r.get("urn") or "" for r in resources]
    if len(urns) < 2:
        return
    for w in waivers:
        if stack in w.stacks and all(any(pattern_matches(p, u) for p in w.resources) for u in urns):
            raise WaiverError(
                f"waiver #{w.index} ({w.rule}): resources {list(w.resources)} match all {len(urns)} resources "
                f"of stack {stack}; name the resources it accepts"
            )
