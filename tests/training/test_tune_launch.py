"""`python -m training launch --tune`: the Indexed Job of tuning workers is a valid Kubernetes object."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml

from training.cli import main

K8S_VERSION = "1.33"  # the stacks' cluster minor (Pulumi.*.yaml kubernetesVersion)


def render(capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict]:
    args = ["launch", "--tune", "--image", "reg/training@sha256:" + "a" * 64, "--workers", "3"]
    assert main([*args, "--trials", "12", "--trial-timeout", "600", "--budget-eur", "20", *extra]) == 0
    return list(yaml.safe_load_all(capsys.readouterr().out))


def test_tune_job_is_a_valid_indexed_job_of_workers_sharing_the_study(
    capsys: pytest.CaptureFixture[str],
) -> None:
    docs = render(capsys)
    assert [d["kind"] for d in docs] == ["Job"]  # no rendezvous Service: workers are independent
    job = docs[0]
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 3
    assert job["metadata"]["name"] == "sentiment-tune"
    rules = spec["podFailurePolicy"]["rules"]
    assert any(r["action"] == "Ignore" and 75 in r.get("onExitCodes", {}).get("values", []) for r in rules)
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"platform.eu-ml/pool": "gpu"}
    container = pod["containers"][0]
    assert container["command"][:4] == ["python", "-m", "training", "tune"]
    cmd = container["command"]
    assert cmd[cmd.index("--trials") + 1] == "12" and cmd[cmd.index("--budget-eur") + 1] == "20.0"
    assert cmd[cmd.index("--checkpoint-uri") + 1].endswith("/tune/sentiment-tune")  # the Job's own trials
    storage = next(e for e in container["env"] if e["name"] == "TRAINING_TUNE_STORAGE")
    assert storage["valueFrom"]["secretKeyRef"] == {"name": "optuna-storage", "key": "url"}
    assert "ports" not in container


def test_tune_job_rejects_more_workers_than_trials(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["launch", "--tune", "--image", "reg/training:1", "--workers", "5", "--trials", "2"]
    assert main([*args, "--trial-timeout", "60"]) == 2
    assert "trials" in capsys.readouterr().err
