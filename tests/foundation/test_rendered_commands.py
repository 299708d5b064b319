"""The commands the platform renders for machines parse, and run in an image that has them.

test_readme_commands.py holds the READMEs to the CLIs; this holds what nobody copies by hand: the containers
of every committed stack's offline plan (CronJobs, Deployments, StatefulSets, Argo WorkflowTemplates), the
Jobs `python -m training launch` (and `--tune`) prints, the templates `python -m pipeline render` prints,
the GitHub workflows' `run:` scripts (and the Makefile recipes they run with their variables) and
.github/scripts, and the images' ENTRYPOINT/CMD. Each `python -m <project package> ...` is parsed by the
module's real argparse parser (captured as `python -m` builds it, in one subprocess), so subcommands, flags,
choices and types are the module's own; `training.elastic` (torchrun) is parsed by torchrun's parser and the
module it starts by that module's. Each one that runs in one of our images must find its package there
(COPY'd to /opt/app and let into the build context by .dockerignore), and an absolute path it is given must
be on a volume the container mounts or in the image's layout (written on a read-only root: a mount only).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
import yaml
from rendered_commands import (
    ROOT,
    Invocation,
    capture_parser,
    effective_argv,
    from_dockerfiles,
    from_k8s_object,
    from_workflows,
    image,
    image_name,
    in_build_context,
    project_command,
)

# --- the real parsers, in one subprocess ------------------------------------------------------------------


def _capture(module: str) -> argparse.ArgumentParser | str:
    found = capture_parser(module)
    return (
        found if not isinstance(found, str) else f"`python -m {module}` did not build a parser here: {found}"
    )


def _parse(module: str, argv: list[str], parsers: dict[str, Any]) -> list[str]:
    """What the module's parser says about argv: [] when it accepts it."""
    if module not in parsers:
        parsers[module] = _capture(module)
    parser = parsers[module]
    if isinstance(parser, str):
        return [parser]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            ns = parser.parse_args(argv)
        except SystemExit as exc:
            if exc.code == 0:  # --help
                return []
            return [err.getvalue().strip().splitlines()[-1]]
    if getattr(ns, "unavailable", False):
        return [f"the subcommand is unavailable here ({ns.command})"]
    script = getattr(ns, "training_script", None)
    if script is not None and hasattr(ns, "training_script_args"):  # torchrun: the module it starts
        if not getattr(ns, "module", False):
            return [f"torchrun runs the file {script!r}, not a module (-m missing)"]
        return [f"{script}: {e}" for e in _parse(script, list(ns.training_script_args), parsers)]
    return []


@cache
def _verdicts(
    requests: tuple[tuple[str, tuple[str, ...]], ...],
) -> dict[tuple[str, tuple[str, ...]], list[str]]:
    done = subprocess.run(
        [sys.executable, __file__],
        input=json.dumps(requests),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    return {req: answer for req, answer in zip(requests, answers, strict=True)}


def parse_problems(invocations: list[Invocation]) -> list[str]:
    commands = [(inv, project_command(inv.argv)) for inv in invocations]
    requests = tuple(sorted({(c[0], tuple(c[1])) for _, c in commands if c}))
    verdicts = _verdicts(requests)
    return [f"{inv}\n    {e}" for inv, c in commands if c for e in verdicts[(c[0], tuple(c[1]))]]


# --- what each source renders -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plans(committed_plans: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every committed stack in preview, as `python -m infra.plan` writes it (tests/conftest.py)."""
    return committed_plans


def plan_objects(plans: dict[str, dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for stack, doc in plans.items():
        for r in doc["resources"]:
            kind = r["type"].rsplit(":", 1)[-1]
            if r["type"].startswith("kubernetes:") and not r["type"].startswith("kubernetes:helm.sh/"):
                yield f"plan {stack}", {**r["inputs"], "kind": kind}


@pytest.fixture(scope="module")
def plan_invocations(plans: dict[str, dict[str, Any]]) -> list[Invocation]:
    return [inv for source, obj in plan_objects(plans) for inv in from_k8s_object(source, obj)]


LAUNCHES = {
    "launch": ["--nodes", "2", "--gpus-per-node", "1", "--preset", "gpu", "--data", "s3://b/data.csv",
               "--checkpoint-uri", "s3://b/ckpt", "epochs=1"],
    "launch --tune": ["--tune", "--workers", "2", "--trials", "4", "--budget-eur", "50", "--study-name", "s",
                      "--sampler", "random", "--pruner", "none", "--preset", "gpu", "--checkpoint-uri", "s3://b/t",
                      "epochs=1"],
}  # fmt: skip


@pytest.fixture(scope="module")
def cli_invocations(tmp_path_factory: pytest.TempPathFactory) -> list[Invocation]:
    """What `python -m training launch [--tune]` and `python -m pipeline render` print, through their CLIs."""
    from pipeline import cli as pipeline_cli
    from training import cli as training_cli

    out = tmp_path_factory.mktemp("rendered")
    found = []
    for name, flags in LAUNCHES.items():
        path = out / f"{name.replace(' ', '')}.yaml"
        image_ref = "reg.example/mlp/training:0.1.0-abc1234"
        assert training_cli.main(["launch", *flags, "--image", image_ref, "--out", str(path)]) == 0
        for doc in yaml.safe_load_all(path.read_text()):
            found += from_k8s_object(f"python -m training {name}", doc)
    for env in ("dev", "staging", "prod"):
        argv = ["render", "--training-image", "reg.example/mlp/training@sha256:" + "1" * 64, "--env", env,
                "--serving-image", "reg.example/mlp/serving@sha256:" + "2" * 64, "--out", str(out / env)]  # fmt: skip
        with contextlib.redirect_stdout(io.StringIO()):
            assert pipeline_cli.main(argv) == 0
        for doc in yaml.safe_load_all((out / env / f"retrain-{env}.yaml").read_text()):
            found += from_k8s_object(f"python -m pipeline render --env {env}", doc)
    return found


def ours(inv: Invocation) -> bool:
    return inv.image is not None and image(image_name(inv.image)) is not None


# --- the tests --------------------------------------------------------------------------------------------


def test_the_sources_render_what_this_test_expects(
    plan_invocations: list[Invocation], cli_invocations: list[Invocation]
) -> None:
    """A change that made the collection find nothing would pass every check below."""
    modules = {c[0] for inv in plan_invocations if (c := project_command(inv.argv))}
    assert {"monitoring", "pipeline", "training"} <= modules, modules
    launched = {c[0] for inv in cli_invocations if (c := project_command(inv.argv))}
    assert {"training.elastic", "training", "pipeline", "monitoring"} <= launched, launched
    shell = {c[0] for inv in from_workflows() if (c := project_command(inv.argv))}
    assert {"promotion", "serving", "containers.build"} <= shell, shell
    assert any(inv.argv[:1] == ("tritonserver",) for inv in plan_invocations), "the serving Deployment's CMD"


def test_plan_containers_parse(plan_invocations: list[Invocation]) -> None:
    errors = parse_problems(plan_invocations)
    assert not errors, "commands the plans run that their CLIs refuse:\n" + "\n".join(errors)


def test_launch_and_render_commands_parse(cli_invocations: list[Invocation]) -> None:
    errors = parse_problems(cli_invocations)
    assert not errors, "commands launch/render print that their CLIs refuse:\n" + "\n".join(errors)


def test_workflow_and_image_commands_parse() -> None:
    errors = parse_problems([*from_workflows(), *from_dockerfiles()])
    assert not errors, "commands the workflows and images run that their CLIs refuse:\n" + "\n".join(errors)


def test_the_image_ships_the_package_its_command_runs(
    plan_invocations: list[Invocation], cli_invocations: list[Invocation]
) -> None:
    errors = []
    for inv in [*plan_invocations, *cli_invocations, *from_dockerfiles()]:
        command = project_command(inv.argv)
        if command is None or inv.image is None:
            continue
        img = image(image_name(inv.image))
        if img is None:
            errors.append(f"{inv}\n    runs project code in {inv.image}, which is not one of containers/*/")
            continue
        package = command[0].split(".")[0]
        module_file = command[0].replace(".", "/")
        entry = f"{module_file}/__main__.py" if (ROOT / module_file).is_dir() else f"{module_file}.py"
        if package not in img.packages:
            errors.append(
                f"{inv}\n    containers/{img.name}/Dockerfile copies {sorted(img.packages)}, not {package}"
            )
        elif not in_build_context(entry):
            errors.append(f"{inv}\n    {entry} is not in the build context (.dockerignore)")
    assert not errors, "commands whose image lacks their code:\n" + "\n".join(errors)


# Absolute values that are not file paths: Azure resource ids (`monitoring budget --scope`).
NOT_PATHS = ("//", "/subscriptions/", "/providers/")
# Relative-looking values that are cloud resource names: GCP's `projects/P/subscriptions/S` (budget --subscription).
NOT_RELATIVE = ("projects/",)


def _under(path: str, folders: tuple[str, ...]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def test_absolute_paths_given_to_commands_exist_in_the_pod(
    plan_invocations: list[Invocation], cli_invocations: list[Invocation]
) -> None:
    errors = []
    for inv in [*plan_invocations, *cli_invocations]:
        command = project_command(inv.argv)
        if command is None or not ours(inv):
            continue
        img = image(image_name(inv.image or ""))
        assert img is not None
        for word in command[1]:
            value = word.split("=", 1)[-1] if word.startswith("--") else word
            if not value.startswith("/") or value.startswith(NOT_PATHS):
                continue
            if _under(value, inv.mounts):
                continue
            if inv.read_only_root:
                errors.append(
                    f"{inv}\n    {value}: not on a mounted volume, and the root filesystem is read-only"
                )
            elif not _under(value, img.layout):
                errors.append(
                    f"{inv}\n    {value}: neither mounted ({inv.mounts}) nor in the image ({img.layout})"
                )
    assert not errors, "paths the commands are given that their pod does not have:\n" + "\n".join(errors)


def relative_paths(invocations: list[Invocation]) -> list[str]:
    """A relative file path given to a command in a pod resolves against the image's WORKDIR, which the images
    leave empty (the repository's runs/ is not there): unless a volume is mounted there, nothing exists."""
    errors = []
    for inv in invocations:
        command = project_command(inv.argv)
        if command is None or not ours(inv):
            continue
        img = image(image_name(inv.image or ""))
        assert img is not None
        args = command[1]
        for i, value in enumerate(args):
            flag = args[i - 1] if i else ""
            if (
                "/" not in value
                or "://" in value
                or value.startswith(("/", "-", "{{", *NOT_RELATIVE))
                or flag.endswith("-image")
            ):
                continue
            if not _under(f"{img.workdir.rstrip('/')}/{value}", inv.mounts):
                errors.append(
                    f"{inv}\n    {flag} {value}: a path relative to {img.workdir}, empty in the image"
                )
    return errors


def test_no_relative_file_paths_in_the_plans_and_launch_jobs(
    plan_invocations: list[Invocation], cli_invocations: list[Invocation]
) -> None:
    launched = [inv for inv in cli_invocations if "pipeline render" not in inv.source]
    errors = relative_paths([*plan_invocations, *launched])
    assert not errors, "relative paths the pods do not have:\n" + "\n".join(errors)


def test_no_relative_file_paths_in_what_pipeline_render_prints(cli_invocations: list[Invocation]) -> None:
    errors = relative_paths([inv for inv in cli_invocations if "pipeline render" in inv.source])
    assert not errors, "relative paths the pods do not have:\n" + "\n".join(errors)


def test_argo_output_parameters_read_the_file_the_step_writes(cli_invocations: list[Invocation]) -> None:
    """`when: {{tasks.X.outputs.parameters.flag}} == true` reads the file `valueFrom.path` names: the step must be
    told to write exactly that file."""
    from pipeline import argo, dag

    doc = argo.workflow_template(training_image="reg.example/t:1", environment="dev", params=dag.Params())
    checked = 0
    for t in doc["spec"]["templates"]:
        for p in t.get("outputs", {}).get("parameters", ()):
            path = p["valueFrom"]["path"]
            assert path in effective_argv(t["container"]), f"{t['name']}: output {p['name']} reads {path}"
            checked += 1
    assert checked >= 3


def test_a_bogus_flag_value_or_subcommand_is_caught() -> None:
    """What the drift looks like, on a CronJob-shaped container: each kind of mistake is named."""
    bad = [
        Invocation("t", "r/training:1", ("python", "-m", "monitoring", "drift", "--no-such-flag", "x")),
        Invocation("t", "r/training:1", ("python", "-m", "pipeline", "step", "train", "--mode", "sideways")),
        Invocation("t", "r/training:1", ("python", "-m", "promotion", "frobnicate")),
        Invocation("t", "r/training:1", ("python", "-m", "training.elastic", "--nnodes=1", "-m", "training",
                                         "train", "--bogus")),
    ]  # fmt: skip
    errors = parse_problems(bad)
    assert len(errors) == 4, errors
    assert "--no-such-flag" in errors[0] and "sideways" in errors[1] and "frobnicate" in errors[2], errors
    assert errors[3].endswith("training: python -m training: error: unrecognized arguments: --bogus"), errors


if __name__ == "__main__":  # the subprocess _verdicts runs: JSON requests on stdin, one JSON line out
    sys.path.insert(0, str(ROOT))
    requests = json.loads(sys.stdin.read())
    captured: dict[str, Any] = {}
    answers = [_parse(module, list(argv), captured) for module, argv in requests]
    sys.stdout.flush()
    print(json.dumps(answers))
