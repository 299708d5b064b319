"""The <stack>.json results the runner leaves in --out, and which of them are still current.

The promotion gate and the demo read any <stack>.json in the folder as the current result of that stack, so a
run removes the results that are stale. A result is current while the plan file it judged is still there,
byte for byte (`plan_sha256`): one CI job per stack into one folder, or a check of one stack after a change,
keeps the other stacks' results. A run over a whole folder of plans (`policies.report --plans DIR`) is
complete: the result of a stack with no plan there is stale whatever its plan says.

The plan is not all that decided a result: the waivers (which findings are accepted, until when), the pack config
and the pack (its version and the digest of its files) did too. A kept result is stale when any of them differs from this run's (`Judges`), or when
a waiver it relies on has ended by this run's date: its waived finding would be a violation now.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policies.plans import PlanError

RESULT_SCHEMA = "policies.analyze/stack-result-v1"
"""The `schema` of every <stack>.json this runner writes: how a later run knows a file is its own result."""
# A result written before the marker existed: these keys, and `stack` equal to the file name.
_LEGACY_RESULT_KEYS = frozenset(
    {"stack", "plan", "plan_sha256", "violations", "waived", "policies", "evaluated"}
)


def write_atomically(path: Path, text: str) -> None:
    """The promotion gate, the demo and reviewers read what the runner and the report write: a run that is
    interrupted, or fails to write (disk full), or runs beside another one, leaves either the previous
    complete file or the new one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the result from CI's other users
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def plan_record(path: Path, sha256: str) -> dict[str, str]:
    """What a result records of the plan it judged. `plan` is the path as given (the promotion gate resolves it
    against the result's folders); `plan_file` is the same path made absolute, so a later run from another
    folder still finds it."""
    return {"plan": str(path), "plan_file": os.path.abspath(path) if sha256 else "", "plan_sha256": sha256}


@dataclass(frozen=True)
class Judges:
    """What judged the results of a run besides the plan: the waivers file (as given, and the sha256 of the bytes
    read; "" for the pack's own file when absent), the pack config (None: none given), the pack version, the
    date waiver expiry was evaluated on and the digest of the pack's files."""

    waivers: Path
    waivers_sha256: str
    config: Path | None
    config_sha256: str | None
    pack_version: str
    today: dt.date
    pack_sha256: str
    """policies.client.pack_digest: the pack's files, which change while the version does not."""

    def record(self) -> dict[str, str | None]:
        """The fields a result records, so a later run (and the promotion gate) can tell it was judged by them."""
        return {
            "waivers_path": str(self.waivers),
            "waivers_file": os.path.abspath(self.waivers),
            "waivers_sha256": self.waivers_sha256,
            "config_file": None if self.config is None else os.path.abspath(self.config),
            "config_sha256": self.config_sha256,
        }

    def stale(self, doc: Mapping[str, Any]) -> str | None:
        """Why a result judged by other waivers, config or pack (or relying on a waiver ended by `today`) is not
        current; None when it is. A result without these fields was written before they were recorded: it
        cannot be shown current, so it goes, as one without plan_sha256 does."""
        recorded = doc.get("waivers_sha256")
        if not isinstance(recorded, str):
            return "its result records no waivers_sha256 (written before the waivers were recorded)"
        if recorded != self.waivers_sha256:
            return (
                f"it was judged with other waivers than {self.waivers} (waivers_sha256 differs: "
                "a waiver added, revoked or changed since)"
            )
        if doc.get("config_sha256", "missing") != self.config_sha256:
            now = "no --config" if self.config is None else f"--config {self.config}"
            return f"it was judged with another pack config than this run's {now} (config_sha256 differs)"
        pack = doc.get("pack")
        version = pack.get("version") if isinstance(pack, Mapping) else None
        if version != self.pack_version:
            return f"it was judged by pack version {version!r}, this run's is {self.pack_version!r}"
        digest = pack.get("sha256") if isinstance(pack, Mapping) else None
        if digest != self.pack_sha256:
            if not isinstance(digest, str):
                return "its result records no pack.sha256 (written before the pack's files were recorded)"
            return (
                f"it was judged by other pack files (pack.sha256 {digest[:12]}..., this run's {self.pack_sha256[:12]}...: "
                "a rule, its mapping or its data changed since)"
            )
        ended = ended_waivers(doc, self.today)
        if ended:
            first = ended[0]
            return f"waiver #{first['id']} it relies on ended on {first['expires']} (this run's date: {self.today})"
        return None


def ended_waivers(doc: Mapping[str, Any], today: dt.date) -> list[dict[str, Any]]:
    """The waivers of a result's `waived` findings that have ended by `today` (a waiver applies through its
    `expires` day, as waivers.Waiver.active says), once each. A malformed date counts as ended: unreadable
    evidence of acceptance is no acceptance."""
    found: dict[Any, dict[str, Any]] = {}
    for entry in doc.get("waived") or []:
        waiver = entry.get("waiver") if isinstance(entry, Mapping) else None
        if not isinstance(waiver, Mapping):
            continue
        try:
            expires = dt.date.fromisoformat(str(waiver.get("expires")))
        except ValueError:
            expires = None
        if expires is None or expires < today:
            found.setdefault(
                waiver.get("id"), {**waiver, "policy": entry.get("policy"), "urn": entry.get("urn")}
            )
    return list(found.values())


def own_result(path: Path) -> dict[str, Any] | None:
    """The result in `path` if this runner wrote it (its `schema` marker, or the shape it wrote before the
    marker), else None: anything else in the folder is not the runner's to remove."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("stack") != path.stem:
        return None
    return doc if doc.get("schema") == RESULT_SCHEMA or doc.keys() >= _LEGACY_RESULT_KEYS else None


def plan_candidates(doc: Mapping[str, Any], result: Path) -> list[Path]:
    """Where the plan a result judged may be, first found first. `plan_file` (absolute) when recorded; then,
    for `plan` as given (results written before `plan_file`, or a checkout that moved), the result's own
    folders nearest first and the working folder last, as the promotion gate looks for it
    (promotion/evidence.py plan_candidates): `make policy` runs at the root above reports/policy."""
    found: list[Path] = []
    plan_file = doc.get("plan_file")
    if isinstance(plan_file, str) and plan_file:
        found.append(Path(plan_file))
    plan = doc.get("plan")
    if isinstance(plan, str) and plan:
        if Path(plan).is_absolute():
            found.append(Path(plan))
        else:
            found += [folder / plan for folder in result.resolve().parents]
            found.append(Path(plan).absolute())
    unique: list[Path] = []
    for path in found:
        if path not in unique:
            unique.append(path)
    return unique


def staleness(
    result: Path, doc: Mapping[str, Any], project: Collection[str], judges: Judges | None = None
) -> tuple[bool, str]:
    """(stale, why) for the result of a stack this run did not analyse. `project`: the stacks of the project
    (empty: not known), a result of any other stack is stale. `judges`: this run's waivers, config and pack
    (None: not compared)."""
    stale, why = _plan_staleness(result, doc, project)
    if stale or judges is None:
        return stale, why
    other = judges.stale(doc)
    return (
        (True, other)
        if other
        else (False, f"{why}, and it was judged with this run's waivers, config and pack")
    )


def _plan_staleness(result: Path, doc: Mapping[str, Any], project: Collection[str]) -> tuple[bool, str]:
    stack = doc["stack"]
    if project and stack not in project:
        return True, f"it is not a stack of the project (no Pulumi.{stack}.yaml)"
    recorded = doc.get("plan_sha256")
    if not isinstance(recorded, str) or not recorded:
        # Nothing to compare with (a plan read from a pipe): it cannot be shown current, so it goes, as before.
        return True, "its result records no plan_sha256 to compare its plan with"
    candidates = plan_candidates(doc, result)
    for path in candidates:
        try:
            raw = path.read_bytes()
        except OSError:  # missing, a folder, unreadable: not this plan
            continue
        if own_result(path) is not None:
            continue  # a relative `dev.json` resolved into --out itself: a result is never a plan
        if hashlib.sha256(raw).hexdigest() != recorded:
            return True, f"its plan {path} changed since it was analysed (plan_sha256 differs)"
        return False, f"its plan {path} is unchanged since it was analysed"
    looked = ", ".join(str(p) for p in candidates) or "nowhere: it names no plan"
    return True, f"its plan {doc.get('plan')} is gone (looked in {looked})"


def prune_stale_results(
    out_dir: Path,
    stacks: Sequence[str],
    *,
    project: Collection[str] = (),
    complete: str | None = None,
    judges: Judges | None = None,
) -> list[Path]:
    """Remove the stale results of stacks this run did not analyse (see the module docstring), saying why on
    stderr, and say which ones stay. `project`: the project's stacks; it counts only when every stack of this
    run is one of them (a run over another project's plans says nothing of this project's stacks).
    `complete`: why this run covers every stack (`--plans DIR`): then every other result goes. `judges`: what
    judged this run's results (see Judges): a result judged by anything else goes. Only files this
    runner wrote are touched; anything else in the folder is left as it is."""
    project = project if set(stacks) <= set(project) else ()
    removed = []
    for path in sorted(out_dir.glob("*.json")):
        if path.stem in stacks or not path.is_file():
            continue
        doc = own_result(path)
        if doc is None:
            continue
        if complete is not None:
            stale, why = True, f"its result was stale: {complete}"
        else:
            stale, why = staleness(path, doc, project, judges)
        if not stale:
            print(f"kept {path}: stack {path.stem} was not in this run; {why}", file=sys.stderr)
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as err:
            raise PlanError(f"{path}: cannot remove the result of a stack not in this run ({err})") from err
        removed.append(path)
        joined = f" ({why})" if complete is not None else f" and {why}"
        print(f"removed {path}: stack {path.stem} was not in this run{joined}", file=sys.stderr)
    return removed
