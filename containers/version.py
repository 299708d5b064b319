"""The one version scheme of both images: `<semver>-<git short sha>[-m<model version>]`.

- `semver` is the project version in pyproject.toml (bumped by a release).
- the git short sha names the exact source; a tree with uncommitted changes gets
  `-dirty.<8 hex of the changes>` so two different dirty trees never share a tag.
- the serving image adds `-m<model version>`: the same code serving another model is another image.
- an image built on a locally made stand-in base (containers.localbase) adds `-local.<8 hex of its
  build key>`: it never carries the tag a production build of the same commit gets, and a
  different stand-in base gives a different tag.

Tags never move: a version names one source tree (and one model), so rebuilding it gives the same
content; `containers.build` refuses to re-point an existing local tag at a different image, and
`--push` refuses dirty versions.

    python -m containers.version                    # 0.1.0-1a2b3c4
    python -m containers.version --model-version 3  # 0.1.0-1a2b3c4-m3
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from containers.errors import ContainerError

REPO_ROOT = Path(__file__).resolve().parent.parent
# semver.org's grammar for MAJOR.MINOR.PATCH (no pre-release: the sha takes that place).
_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
_MODEL_VERSION = re.compile(r"^[0-9A-Za-z]{1,32}$")
# Docker/OCI tag grammar.
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
# What a repository without any commit yet reports as its sha.
NO_COMMIT = "0000000"


@dataclass(frozen=True, slots=True)
class Version:
    semver: str
    sha: str
    dirty: str | None = None
    """8 hex digits of the uncommitted changes, or None for a clean tree."""
    model_version: str | None = None
    local: str | None = None
    """8 hex digits of the build key when the base is a local stand-in, else None."""

    def __post_init__(self) -> None:
        if not _SEMVER.match(self.semver):
            raise ContainerError(
                f"project version {self.semver!r} is not MAJOR.MINOR.PATCH: fix pyproject.toml"
            )
        if not re.fullmatch(r"[0-9a-f]{7,40}", self.sha):
            raise ContainerError(f"git sha {self.sha!r} is not hexadecimal")
        if self.local is not None and not re.fullmatch(r"[0-9a-f]{8}", self.local):
            raise ContainerError(f"local build key {self.local!r} is not 8 hex digits")
        if self.model_version is not None and not _MODEL_VERSION.match(self.model_version):
            raise ContainerError(
                f"model version {self.model_version!r} must be 1-32 letters/digits (e.g. the Triton version 3)"
            )

    @property
    def tag(self) -> str:
        tag = f"{self.semver}-{self.sha}"
        if self.dirty:
            tag += f"-dirty.{self.dirty}"
        if self.local:
            tag += f"-local.{self.local}"
        if self.model_version is not None:
            tag += f"-m{self.model_version}"
        assert _TAG.match(tag), tag
        return tag

    @classmethod
    def parse(cls, tag: str) -> Version:
        """The Version a tag names (e.g. one read back from a build record)."""
        m = re.fullmatch(
            r"(\d+\.\d+\.\d+)-([0-9a-f]{7,40})(?:-dirty\.([0-9a-f]{8}))?(?:-local\.([0-9a-f]{8}))?"
            r"(?:-m([0-9A-Za-z]+))?",
            tag,
        )
        if m is None:
            raise ContainerError(
                f"{tag!r} is not an image version (<semver>-<sha>[-dirty.<hash>][-local.<key>][-m<model>])"
            )
        semver, sha, dirty, local, model = m.groups()
        return cls(semver, sha, dirty, model, local)

    def for_model(self, model_version: str | int) -> Version:
        return Version(self.semver, self.sha, self.dirty, str(model_version), self.local)

    def on_local_base(self, build_key: str) -> Version:
        return Version(self.semver, self.sha, self.dirty, self.model_version, build_key[:8])

    def __str__(self) -> str:
        return self.tag


def project_semver(pyproject: Path = REPO_ROOT / "pyproject.toml") -> str:
    with pyproject.open("rb") as fh:
        return str(tomllib.load(fh)["project"]["version"])


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=False)


def git_state(root: Path = REPO_ROOT) -> tuple[str, str | None]:
    """(short sha, dirty hash or None) of the working tree at `root`."""
    if _git(root, "rev-parse", "--git-dir").returncode != 0:
        raise ContainerError(f"{root} is not a git checkout: image versions name a commit")
    head = _git(root, "rev-parse", "--short=7", "HEAD")
    sha = head.stdout.decode().strip() if head.returncode == 0 else NO_COMMIT
    digest = hashlib.sha256()
    # Tracked changes against HEAD (or against the empty tree before the first commit) ...
    diff = (
        _git(root, "diff", "--binary", "HEAD")
        if head.returncode == 0
        else _git(root, "diff", "--binary", "--cached")
    )
    digest.update(diff.stdout)
    status = _git(root, "status", "--porcelain=v1", "--untracked-files=all", "-z").stdout
    # ... and the content of untracked, not ignored files: both end up in an image's context.
    for entry in status.split(b"\0"):
        if entry.startswith(b"?? "):
            path = root / entry[3:].decode()
            digest.update(entry)
            if path.is_file():
                digest.update(path.read_bytes())
    dirty = bool(status.strip()) or head.returncode != 0
    return sha, (digest.hexdigest()[:8] if dirty else None)


def compute(model_version: str | int | None = None, root: Path = REPO_ROOT) -> Version:
    sha, dirty = git_state(root)
    return Version(
        project_semver(root / "pyproject.toml"),
        sha,
        dirty,
        None if model_version is None else str(model_version),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m containers.version", description="Print the image version."
    )
    parser.add_argument("--model-version", help="the serving image's model version (adds -m<N>)")
    args = parser.parse_args(argv)
    print(compute(args.model_version).tag)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
