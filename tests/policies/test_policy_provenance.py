"""A report a reviewer signs: the same inputs give the same bytes, and it names exactly what judged the plans (the
pack's files, not only its version; the waivers and the pack config), as do the results a later run keeps."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import policy_fixtures as fx
import pytest

from policies import report
from policies.client import pack_digest, pack_version
from policies.pack_files import PACK_DIR, pack_files
from policies.results import Judges
from policies.waivers import WAIVERS_FILE

REPO = PACK_DIR.parent
TODAY = dt.date(2026, 12, 2)
REPORTS = ("compliance.md", "compliance.html", "policy.sarif", "policy-junit.xml")


@pytest.fixture(scope="module")
def reruns(
    tmp_path_factory: pytest.TempPathFactory, pack_python: Path
) -> tuple[Path, list[dict[str, bytes]]]:
    """The report built over one plan and pack config three times: twice in one folder (what a reviewer re-runs to
    check a signed copy), the plans named once absolute and once relative, then in a copy of those inputs in
    another folder (another clone)."""
    root = tmp_path_factory.mktemp("provenance")
    for clone in ("a", "b"):
        (root / clone / "plans").mkdir(parents=True)
        (root / clone / "plans" / "dev.json").write_text(json.dumps(fx.aws_stack()))
        (root / clone / "pack-config.json").write_text('{"all": "mandatory"}\n')
    runs = []
    for clone, plans in (("a", root / "a" / "plans"), ("a", Path("plans")), ("b", Path("plans"))):
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(root / clone)
            config = Path("pack-config.json")
            report.build(
                plans,
                Path("reports"),
                config_path=config,
                today=TODAY,
                with_checkov=False,
                python=pack_python,
            )
        runs.append({name: (root / clone / "reports" / name).read_bytes() for name in REPORTS})
    return root / "a" / "reports", runs


@pytest.mark.integration
def test_reruns_over_the_same_inputs_give_the_same_bytes(
    reruns: tuple[Path, list[dict[str, bytes]]],
) -> None:
    """The report printed the time to the minute ("Generated 2026-12-07 18:56 UTC"): no two runs matched, so a
    signature or a hash of a signed report could never be checked by running it again."""
    _, (first, *others) = reruns
    assert [(i, n) for i, run in enumerate(others, 2) for n in REPORTS if run[n] != first[n]] == []
    for name in ("compliance.md", "compliance.html"):
        text = first[name].decode()
        assert not re.search(r"\b\d{2}:\d{2}\b", text), f"{name} holds a time of day"
        assert re.search(r"Generated \d{4}-\d{2}-\d{2} \(UTC\)", text), f"{name} names no date"


@pytest.mark.integration
def test_the_report_names_the_pack_files_waivers_and_config_it_ran_with(
    reruns: tuple[Path, list[dict[str, bytes]]],
) -> None:
    """The version (0.2.0) stayed the same while rules changed: the report could not say which rules judged."""
    out, (first, *_) = reruns
    digest = pack_digest()
    result = json.loads((out / "policy/dev.json").read_text())
    assert result["pack"]["sha256"] == digest and result["pack"]["version"] == pack_version()
    md = first["compliance.md"].decode()
    waivers_sha = hashlib.sha256(WAIVERS_FILE.read_bytes()).hexdigest()
    assert f"files sha256 `{digest}`" in md
    # Relative to the repository, or to the folder the command ran in: never a path of one checkout.
    config_sha = hashlib.sha256(b'{"all": "mandatory"}\n').hexdigest()
    assert f"- Waivers: `policies/waivers.yaml`, sha256 `{waivers_sha}`" in md
    assert f"- Pack config: `pack-config.json`, sha256 `{config_sha}`" in md
    assert "| dev | `plans/dev.json` |" in md
    assert str(out.parent) not in md and str(REPO) not in md
    sarif = json.loads(first["policy.sarif"])
    assert sarif["runs"][0]["properties"]["packSha256"] == digest


def _judges() -> Judges:
    return Judges(WAIVERS_FILE, "w" * 64, None, None, pack_version(), TODAY, pack_digest())


def _kept_result(pack: dict[str, Any]) -> dict[str, Any]:
    return {"waivers_sha256": "w" * 64, "config_sha256": None, "pack": pack, "waived": []}


def test_a_kept_result_judged_by_other_pack_files_is_stale() -> None:
    """A rule edited without a version bump: the other stacks' results, judged by the old rule, were kept as
    current (same plan, waivers, config and version) and the promotion gate read them."""
    judges = _judges()
    same = {"version": pack_version(), "sha256": pack_digest()}
    assert judges.stale(_kept_result(same)) is None
    assert "judged by other pack files" in (judges.stale(_kept_result({**same, "sha256": "0" * 64})) or "")
    older = {"version": pack_version()}  # written before the digest was recorded: cannot be shown current
    assert "records no pack.sha256" in (judges.stale(_kept_result(older)) or "")


def test_the_pack_digest_follows_the_rules_not_the_caches_or_waivers(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    (pack / "rules" / "__pycache__").mkdir(parents=True)
    (pack / "rules" / "iam.py").write_text("LIMIT = 1\n")
    before = pack_digest(pack)
    (pack / "rules" / "__pycache__" / "iam.cpython-311.pyc").write_bytes(b"\0")
    (pack / "waivers.yaml").write_text("waivers: []\n")  # recorded apart, as waivers_sha256
    assert pack_digest(pack) == before
    (pack / "rules" / "iam.py").write_text("LIMIT = 2\n")
    assert pack_digest(pack) != before


def _pack_copy(tmp_path: Path) -> Path:
    pack = tmp_path / "policies"
    shutil.copytree(PACK_DIR, pack, ignore=shutil.ignore_patterns(".venv", "__pycache__", "*_cache"))
    return pack


def test_the_pack_digest_ignores_files_that_judge_nothing(tmp_path: Path) -> None:
    """Every file under policies/ was hashed: an untracked *.egg-info or .coverage, an editor's backup, a README
    typo fix or a report writer's edit changed the digest, and the runner removed every kept result as stale."""
    pack = _pack_copy(tmp_path)
    before = pack_digest(pack)
    assert before == pack_digest(PACK_DIR)  # where the pack lies is not what it is
    (pack / "eu_ml_platform.egg-info").mkdir()
    (pack / "eu_ml_platform.egg-info" / "PKG-INFO").write_text("Name: eu-ml-platform\n")
    (pack / ".cache").mkdir()
    (pack / ".cache" / "x").write_text("x")
    (pack / ".coverage").write_bytes(b"\0")
    (pack / "rules" / "iam.py~").write_text("# an editor's backup\n")
    for name in ("README.md", "schemas/README.md", "writers/markdown.py", "unchecked.yaml", "evidence.py"):
        with (pack / name).open("a", encoding="utf-8") as f:
            f.write("\n")
    # A CRLF checkout (git autocrlf) holds the same rules.
    for name in ("rules/iam.py", "frameworks.yaml"):
        path = pack / name
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert pack_digest(pack) == before


@pytest.mark.parametrize(
    "name",
    ["rules/iam.py", "pack.py", "frameworks.yaml", "catalogue.yaml", "enforcement.yaml", "PulumiPolicy.yaml"],
)
def test_the_pack_digest_changes_with_what_judges(tmp_path: Path, name: str) -> None:
    pack = _pack_copy(tmp_path)
    before = pack_digest(pack)
    with (pack / name).open("a", encoding="utf-8") as f:
        f.write("\n# edited\n")
    assert pack_digest(pack) != before


# Started as the Pulumi CLI starts it (pulumi.policy's runpy.run_path on the folder), with the gRPC server left
# out: which files of the folder it imports and opens.
_LOADED = """
import json, os, runpy, sys
pack_dir = os.path.abspath(sys.argv[1])
opened = set()
sys.addaudithook(lambda event, args: event == "open" and isinstance(args[0], (str, bytes))
                 and opened.add(os.path.abspath(os.fsdecode(args[0]))))
import pulumi_policy
pulumi_policy.PolicyPack = lambda **kwargs: None
runpy.run_path(pack_dir, run_name="__main__")
files = opened | {getattr(m, "__file__", None) or "" for m in list(sys.modules.values())}
inside = [os.path.relpath(f, pack_dir) for f in files if f.startswith(pack_dir + os.sep)]
print(json.dumps(sorted(f for f in inside if not f.startswith(".venv") and "__pycache__" not in f)))
"""


@pytest.mark.integration
def test_the_pack_digest_covers_exactly_the_files_the_pack_loads(pack_python: Path) -> None:
    """A module the pack starts to import, or a data file it starts to read, must enter the digest (and a file
    it no longer loads leave it): otherwise an edit of it judges plans with no trace in the results."""
    proc = subprocess.run(
        [str(pack_python), "-c", _LOADED, str(PACK_DIR)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout.splitlines()[-1])) - {"waivers.yaml"}  # recorded as waivers_sha256
    assert set(pack_files()) == loaded | {"PulumiPolicy.yaml"}  # read by the Pulumi CLI, not the pack
