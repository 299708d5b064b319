"""What an image is made of, for its labels and its tag: git metadata and the build key.

The build key is a sha256 over every input of an image; an existing tag is reused only when the
image under it carries the same key (label `eu.ml-platform.build-key`), so a tag never names two
different images. Images on a local stand-in base carry 8 hex of the key in their tag.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import hashlib
import json
import re
import subprocess
from pathlib import Path

from containers import requirements
from containers.version import REPO_ROOT, Version

# The label an image carries its build key in: a tag is reused (locally and in a registry) only
# when the image under it carries the same key.
BUILD_KEY_LABEL = "eu.ml-platform.build-key"


def git_metadata(root: Path = REPO_ROOT) -> dict[str, str]:
    """Revision, source URL and the commit time (the reproducible 'created')."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    epoch = git("log", "-1", "--format=%ct") or "0"
    created = dt.datetime.fromtimestamp(int(epoch), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "REVISION": git("rev-parse", "HEAD") or "uncommitted",
        "SOURCE": public_source_url(git("remote", "get-url", "origin")),
        "CREATED": created,
        "SOURCE_DATE_EPOCH": epoch,
    }


def public_source_url(remote: str) -> str:
    """The remote as a browsable https URL without credentials: `https://user:token@host/x` and
    `git@host:org/repo.git` both become `https://host/...` (the label is public, the token is not)."""
    from urllib.parse import urlsplit, urlunsplit

    remote = remote.strip()
    if not remote:
        return "https://example.invalid/eu-ml-platform"
    scp = re.fullmatch(r"(?:[^@/]+@)?([^:/]+):(?!//)(.+)", remote)
    if scp and "://" not in remote:
        return f"https://{scp[1]}/{scp[2].removesuffix('.git')}"
    parts = urlsplit(remote)
    if parts.scheme not in ("http", "https", "ssh", "git") or not parts.hostname:
        return "https://example.invalid/eu-ml-platform"  # a local path says nothing public
    host = parts.hostname + (f":{parts.port}" if parts.port and parts.scheme in ("http", "https") else "")
    return urlunsplit(("https", host, parts.path.removesuffix(".git"), "", ""))


def build_key(image: str, version: Version, *, base_digest: str, model_tree: str | None = None) -> str:
    """sha256 over everything that makes the image: the base's digest, the lock files, the
    source revision (with the dirty hash), the model version and what the model is made from
    (`model_repository.model_inputs`)."""
    digest = hashlib.sha256()
    parts = {
        "image": image,
        "base_digest": base_digest,
        "revision": f"{version.sha}-{version.dirty or 'clean'}",
        "model_version": version.model_version,
        "model_tree": model_tree,
        "locks": {
            str(p.relative_to(REPO_ROOT)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in (REPO_ROOT / "requirements/lock.txt", requirements.path_for(image))
            if p.is_file()
        },
        "dockerfile": hashlib.sha256(
            (REPO_ROOT / "containers" / image / "Dockerfile").read_bytes()
        ).hexdigest(),
    }
    digest.update(json.dumps(parts, sort_keys=True).encode())
    return digest.hexdigest()


def tree_digest(root: Path, ignore: tuple[str, ...] = ("__pycache__",)) -> str:
    """Content hash of a folder (the model repository baked into the serving image), without what matches
    `ignore` (glob patterns, as `shutil.ignore_patterns`, matched against every part of a path)."""

    def kept(path: Path) -> bool:
        parts = path.relative_to(root).parts
        return path.is_file() and not any(fnmatch.fnmatch(part, pat) for part in parts for pat in ignore)

    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if kept(p)):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
