"""hadolint, Checkov and the project rules: clean on the committed Dockerfiles, and each one
catches what it is there for on a broken Dockerfile."""

from __future__ import annotations

from pathlib import Path

import pytest

from containers import lint

GOOD_FINAL = """\
ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:26.07-py3@sha256:{digest}
FROM ${{BASE_IMAGE}}
ARG VERSION=0
LABEL org.opencontainers.image.source="s" org.opencontainers.image.revision="r" \\
      org.opencontainers.image.version="${{VERSION}}" org.opencontainers.image.created="c"
USER 10001:10001
HEALTHCHECK NONE
ENTRYPOINT ["python", "-m", "training"]
""".format(digest="a" * 64)


def _rules(path: Path) -> set[str]:
    return {f.rule for f in lint.project_rules(path)}


def test_committed_dockerfiles_are_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert lint.main([]) == 0, capsys.readouterr().out


def test_project_rules_accept_a_good_file(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(GOOD_FINAL)
    assert lint.project_rules(path) == []


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        ("@sha256:" + "a" * 64, "", "base-pinned"),  # a tag alone moves
        ("nvcr.io/nvidia/", "docker.io/someone/", "base-pinned"),
        ("USER 10001:10001", "USER root", "non-root"),
        ("USER 10001:10001", "USER 0", "non-root"),
        ("USER 10001:10001", "USER trainer", "non-root"),  # runAsNonRoot cannot check a name
        ("USER 10001:10001\n", "", "non-root"),
        (' org.opencontainers.image.created="c"', "", "oci-labels"),
        ("ARG VERSION=0", "ARG AWS_SECRET_ACCESS_KEY", "no-secrets"),
        ("ARG VERSION=0", "ENV HF_TOKEN=abc", "no-secrets"),
        # Labels land in the image config, readable by anyone who can pull the image.
        ("LABEL org", 'LABEL aws_secret_access_key="wJalrXUtnFEMI" org', "no-secrets"),
        ("LABEL org", 'LABEL "com.example.api-key"=k1 org', "no-secrets"),
        ("USER 10001", "LABEL db_password hunter2\nUSER 10001", "no-secrets"),  # legacy `LABEL key value`
        ('created="c"', 'created="c" note="aws_secret_access_key=wJalrXUtnFEMI"', "no-secrets"),
        ('source="s"', 'source="https://ci:hunter2@git.example.eu/ml.git"', "no-secrets"),
    ],
)
def test_project_rules_catch(tmp_path: Path, old: str, new: str, rule: str) -> None:
    assert old in GOOD_FINAL
    path = tmp_path / "Dockerfile"
    path.write_text(GOOD_FINAL.replace(old, new))
    assert rule in _rules(path)


# Made-up tokens in each issuer's published format (prefix, alphabet, length).
GITHUB_CLASSIC = "ghp_" + "R2x9kQ7vLm4TzP8wYc3NbF6hJd1sAe5uVo0G"
GITHUB_FINE_GRAINED = "github_pat_" + "11ABCDEFG0aB3dE5gH7jK9" + "_" + "x7" * 29 + "Q"
HUGGING_FACE = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH"
GITLAB = "glpat-" + "a1B2c3D4e5F6g7H8i9J0"


@pytest.mark.parametrize(
    "line",
    [
        f"ENV GH={GITHUB_CLASSIC}",  # a variable name that says nothing
        f'ARG PAT="{GITHUB_FINE_GRAINED}"',
        f"RUN git clone https://{GITHUB_CLASSIC}@github.com/acme/private.git /src",
        f'LABEL note="hub {HUGGING_FACE}"',
        f"# pushed with {GITLAB}",  # a comment: not in the image, but in git
        f"ENV A=1 \\\n    B={GITHUB_CLASSIC}",  # a continuation line
    ],
)
def test_project_rules_catch_known_token_formats(tmp_path: Path, line: str) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(GOOD_FINAL.replace("USER 10001", line + "\nUSER 10001"))
    findings = [f for f in lint.project_rules(path) if f.rule == "no-secrets"]
    assert findings, line
    assert all(GITHUB_CLASSIC not in f.message and HUGGING_FACE not in f.message for f in findings)


# Formats the fixed lengths missed: GitHub's longer tokens (it says lengths may grow, up to 255), GitLab's
# routable tokens (`glpat-<payload>.<version>.<crc>`, 37 to 310 characters), its deploy and CI/CD job tokens, and
# Hugging Face's (deprecated, still found) organization tokens.
LONGER_TOKENS = {
    "GitHub token": "ghp_" + "R2x9kQ7vLm4TzP8wYc3NbF6hJd1sAe5uVo0G" + "Xy7Kq2",
    "GitLab routable token": "glpat-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8" + ".01.0z1a2b3c4",
    "GitLab deploy token": "gldt-" + "Zq8Xw7Vu6Ts5Rq4Po3Nm",
    "GitLab CI/CD job token": "glcbt-" + "64_" + "aB3dE5gH7jK9mN1pQ3sT",
    "Hugging Face organization token": "api_org_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH",
}


@pytest.mark.parametrize("kind", sorted(LONGER_TOKENS))
def test_project_rules_catch_longer_and_newer_token_formats(tmp_path: Path, kind: str) -> None:
    token = LONGER_TOKENS[kind]
    path = tmp_path / "Dockerfile"
    path.write_text(GOOD_FINAL.replace("USER 10001", f"ENV X={token}\nUSER 10001"))
    findings = [f for f in lint.project_rules(path) if f.rule == "no-secrets"]
    assert findings, kind
    assert all(token not in str(f) and token[8:20] not in str(f) for f in findings), findings


def test_prose_about_hugging_face_and_gitlab_settings_passes(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    extra = (
        "# weights come from hf_hub_download at build time; HF_HOME points at the cache\n"
        "# a glpat- or gldt- token is read from the CI variable, never written here\n"
        "ENV HF_HOME=/cache/huggingface HF_HUB_DISABLE_TELEMETRY=1\n"
    )
    path.write_text(GOOD_FINAL.replace("USER 10001", extra + "USER 10001"))
    assert lint.project_rules(path) == []


def test_text_that_only_mentions_a_token_prefix_passes(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    extra = (
        "# the pod reads ghp_... or github_pat_... tokens from its secret, never from here\n"
        "ENV HF_HUB_OFFLINE=1 PIP_NO_CACHE_DIR=1\n"
        'LABEL eu.ml-platform.tokenizer.sha256="' + "a" * 64 + '"\n'
    )
    path.write_text(GOOD_FINAL.replace("USER 10001", extra + "USER 10001"))
    assert lint.project_rules(path) == []


def test_the_scan_catches_each_credential_format(tmp_path: Path) -> None:
    """What a security reviewer tries first, through the whole scan (one Checkov run): GitHub tokens by the
    project rule, an AWS access key id and a private key by Checkov's detectors."""
    values = {
        "ghp": f"ENV GH={GITHUB_CLASSIC}",
        "github_pat": f"ENV GH={GITHUB_FINE_GRAINED}",
        "akia": "ENV KEY_ID=AKIAQ3RZ7MBX2KD4WTLN",
        "private_key": 'ENV K="-----BEGIN RSA PRIVATE KEY-----\\nMIIEpAIBAAKCAQEA7\\n-----END RSA PRIVATE KEY-----"',
    }
    files = {}
    for name, line in values.items():
        (tmp_path / name).mkdir()
        files[name] = tmp_path / name / "Dockerfile"
        files[name].write_text(GOOD_FINAL.replace("USER 10001", line + "\nUSER 10001"))
    findings = lint.lint(list(files.values()))
    secret_rules = {"no-secrets", "CKV_SECRET_2", "CKV_SECRET_13"}
    caught = {
        name
        for name, path in files.items()
        for f in findings
        if f.rule in secret_rules and Path(f.file).resolve() == path.resolve()
    }
    assert caught == set(values), [str(f) for f in findings]


def test_labels_that_only_mention_tokenizers_or_keys_are_not_credentials(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    extra = (
        "ENV TOKENIZERS_PARALLELISM=false\n"
        'LABEL eu.ml-platform.tokenizer.sha256="abc" eu.ml-platform.build-key="k" '
        'org.opencontainers.image.url="https://git.example.eu/ml" '
        'org.opencontainers.image.description="reads its API key from the pod at run time"\n'
    )
    path.write_text(GOOD_FINAL.replace("USER 10001", extra + "USER 10001"))
    assert lint.project_rules(path) == []


def test_hadolint_and_checkov_catch_a_sloppy_dockerfile(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(
        "FROM debian:bookworm\nRUN apt-get update && apt-get install -y curl\nADD app /app\n"
        'LABEL note="AKIAQ3RZ7MBX2KD4WTLN"\n'
    )
    findings = lint.lint([path])
    hadolint = {f.rule for f in findings if f.tool == "hadolint"}
    assert {"DL3008", "DL3015", "DL3009", "DL3020"} <= hadolint  # unpinned apt, recommends, lists, ADD
    checkov = {f.rule for f in findings if f.tool == "checkov"}
    assert {"CKV_DOCKER_2", "CKV_DOCKER_3"} <= checkov  # no HEALTHCHECK, no USER
    assert "CKV_SECRET_2" in checkov  # an AWS access key id in a label value (Checkov's secrets detectors)
    assert {"base-pinned", "non-root", "oci-labels"} <= {f.rule for f in findings if f.tool == "project"}
