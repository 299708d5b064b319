"""What the platform renders for machines to run, as argv lists: the containers of the offline plans' Kubernetes
objects (Jobs, CronJobs, Deployments, StatefulSets, Argo WorkflowTemplates), what `python -m training launch`
and `python -m pipeline render` print, the GitHub workflows' `run:` scripts (with the Makefile recipes their
`make TARGET VAR=...` runs) and .github/scripts, and the images' own ENTRYPOINT/CMD.

A container's argv is resolved as Kubernetes does: `command` replaces the image's ENTRYPOINT (and drops its
CMD), `args` alone replace the CMD. Argo's `{{workflow.parameters.X}}` are filled from the template's own
arguments, as a CronWorkflow that names no arguments submits it.
"""

from __future__ import annotations

import argparse
import itertools
import re
import runpy
import shlex
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from docker.utils.build import PatternMatcher
from dockerfile_parse import DockerfileParser

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = frozenset(
    ("infra", "policies", "training", "serving", "monitoring", "promotion", "pipeline", "demo", "containers",
     "benchmarks")
)  # fmt: skip
PYTHONS = frozenset(("python", "python3", ".venv/bin/python", "$(PY)"))
# Kubernetes kinds whose pod template runs containers, and where that template sits.
POD_PATHS = {
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Pod": ("spec",),
}
ARGO_PARAM = re.compile(r"\{\{\s*workflow\.parameters\.([\w-]+)\s*\}\}")


@dataclass(frozen=True)
class Invocation:
    """One program a machine runs: where it was rendered, the image (None: a CI runner) and its argv."""

    source: str
    image: str | None
    argv: tuple[str, ...]
    mounts: tuple[str, ...] = ()  # the container's volume mount paths
    read_only_root: bool = False

    def __str__(self) -> str:
        return f"{self.source}: {shlex.join(self.argv)}"


@dataclass(frozen=True)
class Image:
    """What one of containers/<name>/Dockerfile's final stage puts in the image."""

    name: str
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    workdir: str
    packages: frozenset[str]  # top-level packages COPY'd under /opt/app (its PYTHONPATH)
    layout: tuple[str, ...]  # folders the Dockerfile creates or copies into (plus /tmp, the user's home)


def _json_or_shell(value: str) -> tuple[str, ...]:
    value = value.strip()
    if value.startswith("["):
        return tuple(yaml.safe_load(value))
    return ("/bin/sh", "-c", value)


@cache
def image(name: str) -> Image | None:
    path = ROOT / "containers" / name / "Dockerfile"
    if not path.is_file():
        return None
    structure = DockerfileParser(path=str(path)).structure
    last_from = max(i for i, ins in enumerate(structure) if ins["instruction"] == "FROM")
    final = structure[last_from:]
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    workdir = "/"
    layout = {"/tmp"}
    packages = set()
    for ins in final:
        kind, value = ins["instruction"], ins["value"]
        if kind == "ENTRYPOINT":
            entrypoint = _json_or_shell(value)
        elif kind == "CMD":
            cmd = _json_or_shell(value)
        elif kind == "WORKDIR":
            workdir = value.strip()
            layout.add(workdir)
        elif kind == "COPY":
            dest = [w for w in value.split() if not w.startswith("--")][-1].rstrip("/")
            layout.add(dest)
            if "--from" not in value and dest.startswith("/opt/app/") and dest.count("/") == 3:
                packages.add(dest.rsplit("/", 1)[1])
        elif kind == "RUN":
            layout.update(m.group(1).rstrip("/") for m in re.finditer(r"--home-dir\s+(\S+)", value))
    return Image(name, entrypoint, cmd, workdir, frozenset(packages), tuple(sorted(layout)))


def image_name(reference: str) -> str:
    """`registry/path/training:tag@sha256:...` -> `training` (the repository's last segment)."""
    repo = reference.split("@", 1)[0]
    last = repo.rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


@cache
def build_context_excludes() -> PatternMatcher:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return PatternMatcher([ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")])


def in_build_context(relative: str) -> bool:
    """Whether the classic builder's context (the repository root, filtered by .dockerignore) holds the file."""
    return (ROOT / relative).is_file() and not build_context_excludes().matches(relative)


# --- containers -------------------------------------------------------------------------------------------


def effective_argv(container: Mapping[str, Any]) -> tuple[str, ...]:
    """What the runtime starts: command replaces the image's ENTRYPOINT and CMD; args alone replace CMD."""
    img = image(image_name(container.get("image", "")))
    entrypoint, cmd = (img.entrypoint, img.cmd) if img else ((), ())
    if container.get("command"):
        return (*container["command"], *container.get("args", ()))
    if "args" in container:
        return (*entrypoint, *container["args"])
    return (*entrypoint, *cmd)


def _container(source: str, c: Mapping[str, Any], params: Mapping[str, str] | None = None) -> Invocation:
    argv = effective_argv(c)
    if params is not None:
        argv = tuple(ARGO_PARAM.sub(lambda m: params.get(m.group(1), m.group(0)), a) for a in argv)
    security = c.get("securityContext") or {}
    return Invocation(
        source=f"{source} container {c.get('name', 'main')}",
        image=c.get("image"),
        argv=argv,
        mounts=tuple(m["mountPath"] for m in c.get("volumeMounts", ())),
        read_only_root=bool(security.get("readOnlyRootFilesystem")),
    )


def _dig(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        obj = obj.get(key) or {}
    return obj


def from_k8s_object(source: str, obj: Mapping[str, Any]) -> Iterator[Invocation]:
    kind = obj.get("kind", "")
    name = f"{source}: {kind} {obj.get('metadata', {}).get('name', '?')}"
    if kind in POD_PATHS:
        pod = _dig(obj, POD_PATHS[kind])
        for c in [*pod.get("initContainers", ()), *pod.get("containers", ())]:
            yield _container(name, c)
    elif kind in ("WorkflowTemplate", "Workflow", "ClusterWorkflowTemplate"):
        yield from _argo(name, obj["spec"])
    elif kind == "CronWorkflow":
        yield from _argo(name, obj["spec"].get("workflowSpec", {}))


def _argo(name: str, spec: Mapping[str, Any]) -> Iterator[Invocation]:
    params = {p["name"]: str(p.get("value", "")) for p in spec.get("arguments", {}).get("parameters", ())}
    for t in spec.get("templates", ()):
        for key in ("container", "script"):
            if key in t:
                yield _container(f"{name} template {t['name']}", {"name": key, **t[key]}, params)
        for c in t.get("containerSet", {}).get("containers", ()):
            yield _container(f"{name} template {t['name']}", c, params)


# --- shell: GitHub workflows, .github/scripts, the Makefile recipes they run ------------------------------


def _makefile() -> tuple[dict[str, str], dict[str, list[str]]]:
    variables: dict[str, str] = {}
    recipes: dict[str, list[str]] = {}
    target = None
    for line in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines():
        if line.startswith("\t") and target:
            recipes[target].append(line.strip())
            continue
        var = re.match(r"^([A-Z_]+)\s*[?:]?=\s*(.*)$", line)
        if var:
            variables[var.group(1)] = var.group(2)
            target = None
            continue
        rule = re.match(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", line)
        target = rule.group(1) if rule else None
        if target:
            recipes[target] = []
    return variables, recipes


def _expand_make(words: list[str]) -> list[str]:
    """`make images IMAGES_ARGS="..."` -> the recipe lines it runs, with the variables given."""
    variables, recipes = _makefile()
    given = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
    lines = []
    for target in (w for w in words if "=" not in w and not w.startswith("-")):
        for line in recipes.get(target, ()):
            lines.append(
                re.sub(
                    r"\$\((\w+)\)",
                    lambda m: (
                        "python"
                        if m.group(1) == "PY"
                        else given.get(m.group(1), variables.get(m.group(1), ""))
                    ),
                    line,
                )
            )
    return lines


def _bash_arrays(script: str) -> dict[str, list[list[str]]]:
    """`approval=(--approval FILE)` assignments: what `"${approval[@]}"` can expand to (nothing, or one of them)."""
    found: dict[str, list[list[str]]] = {}
    for m in re.finditer(r"(\w+)=\(([^)]*)\)", script):
        found.setdefault(m.group(1), [[]]).append(shlex.split(m.group(2)))
    return found


def shell_commands(source: str, script: str, env: Mapping[str, list[str]]) -> Iterator[Invocation]:
    """Each `python -m PKG ...` of a shell script; `$VAR` takes each value `env` lists for it (a workflow
    input's options), else stays a placeholder; `make T VAR=...` is followed into the Makefile."""
    arrays = _bash_arrays(script)
    joined = re.sub(r"\\\n", " ", script)
    for n, line in enumerate(joined.splitlines(), 1):
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        if words[:1] == ["make"]:
            for recipe in _expand_make(words[1:]):
                yield from shell_commands(f"{source}:{n} (make)", recipe, env)
            continue
        for i, _w in enumerate(words[:-2]):
            if project_command(tuple(words[i : i + 3])) is not None:
                for argv in _variants(words[i:], arrays, env):
                    yield Invocation(f"{source}:{n}", None, tuple(argv))


def _substitute(word: str, given: Mapping[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: given.get(m.group(1), m.group(0)), word)


def _variants(
    words: list[str], arrays: Mapping[str, list[list[str]]], env: Mapping[str, list[str]]
) -> Iterator[list[str]]:
    end = next((i for i, w in enumerate(words) if w in ("|", "||", "&&", ";", ">", ">>", "2>&1")), len(words))
    words = words[:end]
    used = sorted({v for w in words for v in re.findall(r"\$\{?(\w+)\}?", w) if v in env})
    seen: set[tuple[str, ...]] = set()
    for values in itertools.product(*(env[v] for v in used)):
        given = dict(zip(used, values, strict=True))
        out: list[list[str]] = [[]]
        for w in words:
            array = re.fullmatch(r"\$\{(\w+)\[@\]\}", w)
            choices = arrays.get(array.group(1), [[]]) if array else [[_substitute(w, given)]]
            out = [[*o, *c] for o in out for c in choices]
        for argv in out:
            if tuple(argv) not in seen:
                seen.add(tuple(argv))
                yield argv


def _workflow_env(workflow: Mapping[Any, Any], *scopes: Mapping[str, Any]) -> dict[str, list[str]]:
    """Variables a run script sees, each with the values it can take: a choice input's options, a literal, or
    nothing known (left out: the script's `$VAR` stays a placeholder)."""
    on = workflow.get("on", workflow.get(True, {})) or {}  # PyYAML reads the key `on` as True (YAML 1.1)
    inputs = (on.get("workflow_dispatch") or {}).get("inputs") or {}
    out: dict[str, list[str]] = {}
    for scope in (workflow, *scopes):
        for name, value in (scope.get("env") or {}).items():
            text = str(value)
            ref = re.fullmatch(r"\$\{\{\s*(?:github\.event\.)?inputs\.([\w-]+)\s*\}\}", text)
            if ref and inputs.get(ref.group(1), {}).get("options"):
                out[name] = [str(o) for o in inputs[ref.group(1)]["options"]]
            elif "${{" not in text:
                out[name] = [text]
            else:
                out.pop(name, None)
    return out


def from_workflows() -> Iterator[Invocation]:
    for path in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
        for job_name, job in workflow["jobs"].items():
            for i, step in enumerate(job.get("steps", ())):
                if "run" in step:
                    source = f"{path.relative_to(ROOT)} job {job_name} step {step.get('name', i)}"
                    yield from shell_commands(source, step["run"], _workflow_env(workflow, job, step))
    for path in sorted((ROOT / ".github" / "scripts").glob("*.sh")):
        yield from shell_commands(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"), {})


def from_dockerfiles() -> Iterator[Invocation]:
    for path in sorted((ROOT / "containers").glob("*/Dockerfile")):
        img = image(path.parent.name)
        assert img is not None
        yield Invocation(f"{path.relative_to(ROOT)} ENTRYPOINT+CMD", img.name, (*img.entrypoint, *img.cmd))


def project_command(argv: tuple[str, ...]) -> tuple[str, list[str]] | None:
    """`python -m training.elastic ...` -> ("training.elastic", [...]); None for any other program."""
    python = len(argv) > 2 and argv[0].rsplit("/", 1)[-1] in PYTHONS and argv[1] == "-m"
    if python and argv[2].split(".")[0] in PACKAGES:
        return argv[2], list(argv[3:])
    return None


# --- the real parsers ----------------------------------------------------------------------------------------


class _Captured(BaseException):  # not Exception: a main that catches Exception must not swallow it
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def capture_parser(module: str) -> argparse.ArgumentParser | str:
    """The parser `python -m module` builds, stopped at its argument parsing (runpy, so `__main__` wiring and
    `register()` hooks count); a string saying why when it builds none. Run it in a subprocess of its own: the
    modules' imports stay out of the test process."""
    real = argparse.ArgumentParser.parse_known_args

    def capture(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise _Captured(self)

    argparse.ArgumentParser.parse_known_args = capture  # type: ignore[method-assign]
    argv, sys.argv = sys.argv, [module]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except _Captured as done:
        return done.parser
    except BaseException as exc:  # noqa: BLE001 - reported with each command of that module
        return f"{type(exc).__name__}: {exc}"
    finally:
        argparse.ArgumentParser.parse_known_args = real  # type: ignore[method-assign]
        sys.argv = argv
    return "ran to the end without parsing any arguments (no argparse CLI)"
