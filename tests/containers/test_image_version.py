"""The image version scheme: <semver>-<git short sha>[-dirty.<hash>][-m<model version>]."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from containers.errors import ContainerError
from containers.version import NO_COMMIT, Version, compute, git_state

TAG = re.compile(r"^[\w][\w.-]{0,127}$")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "ci@example.invalid")
    _git(tmp_path, "config", "user.name", "ci")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1.2.3"\n')
    (tmp_path / "code.py").write_text("print(1)\n")
    return tmp_path


def test_tags() -> None:
    v = Version("1.2.3", "abc1234")
    assert v.tag == "1.2.3-abc1234"
    assert v.for_model(7).tag == "1.2.3-abc1234-m7"
    assert (
        Version("1.2.3", "abc1234", dirty="0badc0de").for_model("3").tag == "1.2.3-abc1234-dirty.0badc0de-m3"
    )
    assert TAG.match(Version("10.20.30", "f" * 40, dirty="12345678", model_version="A" * 32).tag)


def test_parse_round_trips() -> None:
    for v in (Version("1.2.3", "abc1234"), Version("1.2.3", "abc1234", "0badc0de", "3")):
        assert Version.parse(v.tag) == v
    with pytest.raises(ContainerError):
        Version.parse("latest")


@pytest.mark.parametrize(
    ("semver", "sha", "model"),
    [
        ("1.2", "abc1234", None),
        ("01.2.3", "abc1234", None),
        ("1.2.3", "xyz1234", None),
        ("1.2.3", "abc1234", "3/4"),
    ],
)
def test_invalid_versions_say_what_to_fix(semver: str, sha: str, model: str | None) -> None:
    with pytest.raises(ContainerError):
        Version(semver, sha, model_version=model)


def test_uncommitted_repository_is_dirty(repo: Path) -> None:
    sha, dirty = git_state(repo)
    assert sha == NO_COMMIT and dirty is not None


def test_clean_commit_then_changes(repo: Path) -> None:
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "first")
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True
    )
    version = compute(root=repo)
    assert version.tag == f"1.2.3-{head.stdout.strip()}"
    assert version.dirty is None

    (repo / "code.py").write_text("print(2)\n")
    first = git_state(repo)[1]
    (repo / "code.py").write_text("print(3)\n")
    second = git_state(repo)[1]
    # Two different uncommitted trees never share a tag; the same tree gives the same one.
    assert first and second and first != second
    assert git_state(repo)[1] == second

    (repo / "code.py").write_text("print(1)\n")
    (repo / "new.py").write_text("x = 1\n")
    untracked = git_state(repo)[1]
    (repo / "new.py").write_text("x = 2\n")
    assert untracked and git_state(repo)[1] != untracked


def test_not_a_checkout(tmp_path: Path) -> None:
    with pytest.raises(ContainerError, match="not a git checkout"):
        git_state(tmp_path)


def test_this_repository() -> None:
    assert re.match(r"^\d+\.\d+\.\d+-[0-9a-f]{7}(-dirty\.[0-9a-f]{8})?$", compute().tag)
