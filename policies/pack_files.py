"""The files of policies/ that judge a plan, and their digest (a result's `pack.sha256`).

Only what the pack process loads counts: the modules `python -m pulumi.policy <engine> policies` imports (its
__main__.py, pack.py and what that imports, every rule module) and the data they read, plus PulumiPolicy.yaml,
which the Pulumi CLI reads for the version and runtime. The report's own code and data (writers, evidence,
unchecked.yaml, assessment.yaml, checkov_map.yaml), the README, and whatever else lies in the folder (an
*.egg-info, .coverage, an editor's backup) judge nothing: hashed, a README typo fix made every kept result stale,
and the runner removed them (the promotion gate then found no result). waivers.yaml is recorded apart
(`waivers_sha256`): a waiver edit is a new acceptance, not a new pack.
tests/policies/test_policy_provenance.py starts the pack and checks these lists against what it loaded.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

PACK_DIR = Path(__file__).resolve().parent
PACK_MODULES = (
    "__init__.py",
    "__main__.py",
    "enforcement.py",
    "ens_levels.py",
    "frameworks.py",
    "pack.py",
    "waivers.py",
)
PACK_DATA = ("PulumiPolicy.yaml", "catalogue.yaml", "enforcement.yaml", "frameworks.yaml")
RULES_DIR = "rules"
"""Every module of the rules package: policies/rules/__init__.py imports each rule module."""


def pack_files(pack_dir: Path = PACK_DIR) -> list[str]:
    """The judging files present in `pack_dir`, as paths relative to it (posix), in path order."""
    rules = sorted(
        p.relative_to(pack_dir).as_posix()
        for p in (pack_dir / RULES_DIR).rglob("*.py")
        if "__pycache__" not in p.parts and p.is_file()
    )
    return sorted([*(n for n in (*PACK_MODULES, *PACK_DATA) if (pack_dir / n).is_file()), *rules])


def pack_digest(pack_dir: Path = PACK_DIR) -> str:
    """sha256 over the judging files (each one's path in the pack and the sha256 of its bytes, in path order). The
    version in PulumiPolicy.yaml stayed 0.2.0 while rules and frameworks.yaml changed: a report or a kept result
    naming only the version did not say which rules judged it. Line ends are read as LF: a checkout with CRLF
    (git's autocrlf on Windows) holds the same rules and must give the same digest."""
    digest = hashlib.sha256()
    for rel in pack_files(pack_dir):
        data = (pack_dir / rel).read_bytes().replace(b"\r\n", b"\n")
        digest.update(rel.encode("utf-8") + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()
