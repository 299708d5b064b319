"""The rendered Argo objects can really run in a cluster: every step's image carries the code the step imports.

Argo's schema: hera's pydantic models (generated from argo-workflows 4.0.5's JSON schema, the pinned chart's
Argo) with a round trip, so an unknown field fails; each step's container, with the workflow's volumes, as a
Pod validated by kubernetes-validate against the stacks' Kubernetes minor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from dockerfile_parse import DockerfileParser

from pipeline import argo, dag

ROOT = Path(__file__).resolve().parents[2]
K8S_VERSION = "1.33"  # the stacks' cluster minor (Pulumi.*.yaml kubernetesVersion)
TRAINING = "reg.example/mlp/training@sha256:" + "1" * 64
SERVING = "reg.example/mlp/serving@sha256:" + "2" * 64
hera = pytest.importorskip(
    "hera.workflows.models", reason="hera (Argo's schema as models) is a dev dependency"
)


def template() -> dict[str, Any]:
    return argo.workflow_template(
        training_image=TRAINING, environment="dev", params=dag.Params(serving_image=SERVING)
    )


def packages_in(dockerfile: Path) -> set[str]:
    """Top-level Python packages the image's COPY instructions put under /opt/app (its PYTHONPATH)."""
    parser = DockerfileParser(path=str(dockerfile))
    found = set()
    for ins in parser.structure:
        if ins["instruction"] == "COPY" and "--from" not in ins["value"]:
            *_, dest = ins["value"].split()
            if dest.startswith("/opt/app/") and dest.rstrip("/").count("/") == 3:
                found.add(dest.rstrip("/").rsplit("/", 1)[1])
    return found


def test_every_step_runs_in_the_training_image_which_carries_its_package() -> None:
    packages = packages_in(ROOT / "containers" / "training" / "Dockerfile")
    assert {"training", "pipeline", "promotion", "monitoring"} <= packages
    containers = {t["name"]: t["container"] for t in template()["spec"]["templates"] if "container" in t}
    assert set(containers) == {s.name for s in dag.STEPS}
    for name, c in containers.items():
        assert c["image"] == TRAINING, name  # no stock builder image without this repository's code
        assert c["command"] == ["python"] and c["args"][0] == "-m", name
        assert c["args"][1].split(".")[0] in packages, (
            f"{name} runs {c['args'][1]}, not in the training image"
        )


def test_images_step_verifies_ci_images_and_gates_promotion() -> None:
    doc = template()
    params = {p["name"]: p["value"] for p in doc["spec"]["arguments"]["parameters"]}
    assert params["training-image"] == TRAINING and params["serving-image"] == SERVING
    images = next(t for t in doc["spec"]["templates"] if t["name"] == "images")
    assert images["container"]["args"][1:4] == ["pipeline", "step", "images"]
    assert "{{workflow.parameters.serving-image}}" in images["container"]["args"]
    assert images["outputs"]["parameters"][0]["name"] == "flag"
    tasks = {t["name"]: t for t in doc["spec"]["templates"][0]["dag"]["tasks"]}
    assert tasks["promote"]["when"] == "{{tasks.images.outputs.parameters.flag}} == true"
    assert images["container"]["env"] == [{"name": "DOCKER_CONFIG", "value": argo.REGISTRY_CONFIG_DIR}]
    secret = next(v for v in doc["spec"]["volumes"] if v["name"] == argo.REGISTRY_SECRET)["secret"]
    assert secret["optional"] is True  # a registry the node identity opens needs no Secret


def test_rendered_objects_are_valid_argo_and_kubernetes_objects() -> None:
    doc = template()
    for obj in (doc, argo.cron_workflow("dev")):
        model = getattr(hera, obj["kind"]).model_validate(obj)
        back = model.model_dump(by_alias=True, exclude_none=True, mode="json")
        assert json.dumps(back, sort_keys=True) == json.dumps(obj, sort_keys=True), obj["kind"]
    claim = doc["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]
    volumes = [*doc["spec"]["volumes"], {"name": claim, "persistentVolumeClaim": {"claimName": claim}}]
    for t in doc["spec"]["templates"]:
        if "container" not in t:
            continue
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": t["name"], "namespace": argo.NAMESPACE},
            "spec": {
                "serviceAccountName": argo.SERVICE_ACCOUNT,
                "containers": [{"name": "main", **t["container"]}],
                "volumes": volumes,
                "nodeSelector": t["nodeSelector"],
                "tolerations": t.get("tolerations", []),
            },
        }
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def test_the_work_volume_belongs_to_the_group_the_steps_run_as() -> None:
    # A fresh PVC is root-owned; the steps run as the image's numeric USER and write /work: the pod's fsGroup must be
    # that user's group, or the first step fails with "Permission denied".
    parser = DockerfileParser(path=str(ROOT / "containers" / "training" / "Dockerfile"))
    users = [i["value"] for i in parser.structure if i["instruction"] == "USER"]
    uid, _, gid = users[-1].partition(":")
    spec = template()["spec"]
    assert spec["securityContext"]["fsGroup"] == int(gid or uid) == argo.IMAGE_UID
    assert {v["metadata"]["name"] for v in spec["volumeClaimTemplates"]} == {"work"}


@pytest.mark.parametrize(
    "flag,value",
    [("--reference", "runs/demo/train/manifest.json"), ("--current", "file:///tmp/x"), ("--store", "runs/s")],
)
def test_render_refuses_a_local_path_the_pods_cannot_read(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `render` kept the local runner's runs/... defaults for the drift step (no flag to set them), and
    every nightly run of the applied template failed at drift-check."""
    from pipeline.cli import main

    image = "reg.example/training@sha256:" + "1" * 64
    assert main(["render", "--training-image", image, flag, value]) == 2
    assert f"{flag} {value!r} is a path on this machine" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--env", "prdo"], "--env prdo: unknown environment 'prdo': configured are dev, staging, prod"),
        (["--out", "FILE"], "is a file: give the folder to write retrain-dev.yaml into"),
    ],
)
def test_render_refuses_what_each_run_would_fail_on(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: an unknown --env was rendered (exit 0; `run` refuses it), and every scheduled run trained, then failed
    at `promote` (exit 2); an --out that is a file was a traceback."""
    from pipeline.cli import main

    (tmp_path / "FILE").write_text("kept")
    flags = [str(tmp_path / f) if f == "FILE" else f for f in flags]
    assert main(["render", "--training-image", TRAINING, *flags]) == 2
    assert message in capsys.readouterr().err
    assert (tmp_path / "FILE").read_text() == "kept" and not list(tmp_path.glob("retrain-*.yaml"))


@pytest.mark.parametrize(
    "schedule,why",
    [
        ("61 * * * *", "minute '61': 61 is outside 0-59"),
        ("every day", "2 field(s), not 5"),
        ("0 3 * * 7", "day of week '7': 7 is outside 0-6"),
        ("0 3 31 FEBR *", "month 'FEBR': 'FEBR' is not a number or a name"),
        ("*/0 * * * *", "step '0' is not a positive whole number"),
        # Go's Atoi: an empty step, and digits that are not ASCII (str.isdigit took them; "²" was a traceback).
        ("*/ * * * *", "step '' is not a positive whole number"),
        ("\u00b2 * * * *", "minute '\u00b2': '\u00b2' is not a number"),
        ("\u0663 * * * *", "minute '\u0663': '\u0663' is not a number"),
        ("0 23-1 * * *", "range '23-1' runs backwards"),
        ("@every soon", "@every takes a duration"),
    ],
)
def test_render_refuses_a_schedule_argo_would_refuse(
    schedule: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: any --schedule was rendered (exit 0) into a CronWorkflow the controller refuses once applied."""
    from pipeline.cli import main

    assert main(["render", "--training-image", TRAINING, "--schedule", schedule, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"--schedule {schedule!r}: " in err and why in err
    assert 'five fields "minute hour day-of-month month day-of-week", e.g. "0 3 * * *"' in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "schedule", ["30 4 * * 1-5", "*/15 0-6 ? JAN-MAR mon,wed", "0 3 1,15 * *", "@every 6h"]
)
def test_render_keeps_a_valid_schedule(schedule: str, tmp_path: Path) -> None:
    import yaml

    from pipeline.cli import main

    assert main(["render", "--training-image", TRAINING, "--schedule", schedule, "--out", str(tmp_path)]) == 0
    docs = list(yaml.safe_load_all((tmp_path / "retrain-dev.yaml").read_text()))
    assert [d["spec"]["schedules"] for d in docs if d["kind"] == "CronWorkflow"] == [[schedule]]


def test_promote_writes_the_drift_reference_that_drift_check_reads(tmp_path: Path) -> None:
    """The promoted run's reference goes where the next drift-check reads it (promotion's --drift-reference): the
    drift job refuses a window of another model than its reference's, and nothing used to replace it."""
    from pipeline.cli import main

    reference = "s3://team-models/reference/"
    assert (
        main(["render", "--training-image", TRAINING, "--reference", reference, "--out", str(tmp_path)]) == 0
    )
    import yaml

    docs = list(yaml.safe_load_all((tmp_path / "retrain-dev.yaml").read_text()))
    doc = next(d for d in docs if d["kind"] == "WorkflowTemplate")
    params = {p["name"]: p["value"] for p in doc["spec"]["arguments"]["parameters"]}
    assert params["reference"] == reference
    steps = {t["name"]: t["container"]["args"] for t in doc["spec"]["templates"] if "container" in t}
    read = steps["drift-check"][steps["drift-check"].index("--reference") + 1]
    written = steps["promote"][steps["promote"].index("--drift-reference") + 1]
    assert read == written == "{{workflow.parameters.reference}}"
