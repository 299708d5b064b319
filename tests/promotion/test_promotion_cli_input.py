"""What the command line alone shows to be wrong is refused with exit 2, before the store or registry is touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promotion.__main__ import main
from promotion.registry import Registry


@pytest.mark.parametrize(
    "command",
    [
        ["history"],
        ["rollback", "--reason", "p99"],
        ["unlock", "--lock-id", "3f2a"],
        ["rescore", "--candidate", "runs/nowhere"],
    ],
)
def test_a_mistyped_environment_is_refused(command: list[str], tmp_path: Path, capsys) -> None:
    # `history --env prdo` used to answer `prdo serves: nothing` with exit 0: read as "prod serves nothing".
    store = tmp_path / "store"
    assert main([command[0], "--env", "prdo", "--store", str(store), *command[1:]]) == 2
    err = capsys.readouterr().err
    assert "unknown environment 'prdo': configured are dev, staging, prod" in err
    assert not store.exists()


def test_unlock_takes_the_gate_config_that_names_the_environment(tmp_path: Path, capsys) -> None:
    config = tmp_path / "gates.toml"
    config.write_text('[environments.qa]\nstack = "qa"\nslo_p99_ms = 300.0\n')
    store = ["--store", str(tmp_path / "store"), "--lock-id", "3f2a"]
    assert main(["unlock", "--env", "qa", *store, "--config", str(config)]) == 0
    assert "no lock (nothing to do)" in capsys.readouterr().out


def test_approval_for_an_environment_the_gates_do_not_name_is_refused(tmp_path: Path, capsys) -> None:
    # It wrote an approval for `prdo` that no gate reads (exit 0), or said "no approving review" (exit 1).
    reviews = tmp_path / "reviews.json"
    reviews.write_text(json.dumps([{"state": "approved", "environments": [{"name": n}], "user": {"login": "bob"}}
                                   for n in ("prdo", "qa")]))  # fmt: skip
    out = tmp_path / "out" / "approval.json"
    args = ["approval", "--github-reviews", str(reviews), "--out", str(out)]
    assert main([*args, "--env", "prdo"]) == 2
    assert "unknown environment 'prdo': configured are dev, staging, prod" in capsys.readouterr().err
    assert not out.parent.exists()
    config = tmp_path / "gates.toml"  # a team's own environment, named by its own gate config
    config.write_text('[environments.qa]\nstack = "qa"\nslo_p99_ms = 300.0\n')
    assert main([*args, "--env", "qa", "--config", str(config)]) == 0
    assert json.loads(out.read_text())["environment"] == "qa"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "No such file"),
        ("{not json", "Expecting property name"),
        ('{"total_count": 1}', "is not a list of reviews"),
    ],
)
def test_approval_with_a_bad_reviews_file(content: str | None, message: str, tmp_path: Path, capsys) -> None:
    # It was a traceback with exit 1, the code of "no approving review".
    reviews = tmp_path / "reviews.json"
    if content is not None:
        reviews.write_text(content)
    out = tmp_path / "approval.json"
    assert main(["approval", "--env", "prod", "--github-reviews", str(reviews), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--github-reviews {reviews}" in err and message in err and "gh api repos/" in err
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--deploy-out", "--out"])
def test_an_output_path_that_is_a_folder_is_refused_before_promoting(
    flag: str, evidence_files: dict[str, Path], tmp_path: Path, registry: Registry, capsys
) -> None:
    # The promotion used to be recorded, registered and its alias moved before the write failed (exit 2).
    store = tmp_path / "store"
    model = f"m-out{flag.replace('-', '_')}"
    folder = tmp_path / "reports"
    folder.mkdir()
    argv = [
        "promote", "--env", "dev", "--store", str(store), "--model-name", model, "--registry-uri", registry.uri,
        "--candidate", str(evidence_files["candidate"]), "--loadtest", str(evidence_files["loadtest"]),
        "--policy-report", str(evidence_files["policy_report"]), "--local-run", "--no-images",
    ]  # fmt: skip
    assert main([*argv, flag, str(folder)]) == 2
    assert f"{flag} {folder} is a folder" in capsys.readouterr().err
    assert not store.exists() and registry.alias_version(model, "dev") is None
    deploy = tmp_path / "reports" / "dev-deploy.json"
    assert main([*argv, flag, str(deploy)]) == 0
    assert json.loads(deploy.read_text())["environment"] == "dev"


@pytest.mark.parametrize(
    "flags",
    [
        ["--deploy-command", "DEPLOY", "--smoke-command", "DEPLOY"],
        ["--stack-config", "Pulumi.dev.yaml"],
    ],
)
def test_a_local_run_with_deploy_flags_is_refused(
    flags: list[str], evidence_files: dict[str, Path], tmp_path: Path, registry: Registry, capsys
) -> None:
    # The deploy and smoke commands were ignored in silence (exit 0: "PROMOTE", nothing deployed); --stack-config
    # failed (exit 2) only once the record was written and the alias moved.
    ran = tmp_path / "ran"
    stack_config = tmp_path / "Pulumi.dev.yaml"
    stack_config.write_text("config:\n  serving:\n    image: reg.example/serving@sha256:" + "2" * 64 + "\n")
    flags = [
        f"touch {ran}" if f == "DEPLOY" else str(stack_config) if f == "Pulumi.dev.yaml" else f for f in flags
    ]
    store = tmp_path / "store"
    argv = [
        "promote", "--env", "dev", "--store", str(store), "--model-name", "m-local-deploy",
        "--registry-uri", registry.uri, "--candidate", str(evidence_files["candidate"]),
        "--loadtest", str(evidence_files["loadtest"]), "--policy-report", str(evidence_files["policy_report"]),
        "--local-run", "--no-images",
    ]  # fmt: skip
    assert main([*argv, *flags]) == 2
    assert "--local-run never deploys" in capsys.readouterr().err
    assert not ran.exists() and not store.exists()
    assert registry.alias_version("m-local-deploy", "dev") is None
