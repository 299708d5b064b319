"""The promotion gates: pure functions from evidence (plain dicts) and thresholds to a GateResult.

Each gate measures one number (or fact), compares it with one configured threshold,
and says in `detail` what it saw and, when it fails, what to do. A gate whose input
is missing fails (no evidence is not a pass); `not_applicable` is reserved for gates
that truly do not apply (first promotion: no champion; no int8 model shipped; no
approval required; a local run without an image registry, where allowed).

"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import asdict, dataclass
from typing import Any, Literal

from promotion.approval import approved_at_problem
from promotion.classes import mismatch
from promotion.config import EnvironmentConfig, GateConfig
from promotion.evidence import lapsed_waivers, utc_today

Status = Literal["pass", "fail", "not_applicable"]
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
IMAGES = ("training", "serving")


@dataclass(frozen=True, slots=True)
class GateResult:
    name: str
    status: Status
    measured: Any
    threshold: Any
    detail: str

    @property
    def passed(self) -> bool:
        return self.status != "fail"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _metric(metrics: dict[str, Any], split: str, metric: str) -> float | None:
    section = metrics.get(split)
    return _number(section.get(metric)) if isinstance(section, dict) else None


def beats_baseline(metrics: dict[str, Any], cfg: GateConfig) -> GateResult:
    name, threshold = "beats-baseline", cfg.min_margin_over_baseline
    candidate = _metric(metrics, "test", cfg.metric)
    baselines = metrics.get("baselines")
    baseline = _metric(baselines, "tfidf_logreg", cfg.metric) if isinstance(baselines, dict) else None
    if candidate is None or baseline is None:
        return GateResult(
            name,
            "fail",
            None,
            threshold,
            f"metrics.json has no finite test.{cfg.metric} or baselines.tfidf_logreg.{cfg.metric} (missing, or NaN/inf "
            "from a diverged run): retrain with the current trainer",
        )
    margin = round(candidate - baseline, 6)
    ok = margin >= threshold
    return GateResult(
        name,
        "pass" if ok else "fail",
        margin,
        threshold,
        f"test {cfg.metric} {candidate:.4f} vs TF-IDF baseline {baseline:.4f} (margin {margin:+.4f}, "
        f"required >= {threshold:+.4f})" + ("" if ok else ": train longer or on more data before promoting"),
    )


def not_worse_than_champion(
    metrics: dict[str, Any], champion: dict[str, Any] | None, cfg: GateConfig, *, environment: str,
    classes: list[str] | None = None, champion_classes: list[str] | None = None, basis: str = "",
    incomparable: str | None = None,
) -> GateResult:  # fmt: skip
    """`champion` is the current model's metrics.json content (None when the environment has none); `classes` and
    `champion_classes` their label names in class-id order (None: not known, as in records before they were kept).
    `champion` and `basis`/`incomparable` come from promotion/rescore.py `versus`: the champion's numbers on the
    candidate's test rows, or why none exist (the gate then fails: different test sets are never compared)."""
    name, threshold = "not-worse-than-champion", -cfg.champion_tolerance
    candidate = _metric(metrics, "test", cfg.metric)
    if champion is None:
        return GateResult(
            name, "not_applicable", None, threshold, f"no model is promoted to {environment} yet"
        )
    other = mismatch(classes, champion_classes, environment)
    if other:
        return GateResult(name, "fail", None, threshold, other)
    if incomparable:
        return GateResult(name, "fail", None, threshold, incomparable)
    best = _metric(champion, "test", cfg.metric)
    if candidate is None or best is None:
        return GateResult(
            name, "fail", None, threshold, f"test.{cfg.metric} missing from the candidate or champion"
        )
    delta = round(candidate - best, 6)
    ok = delta >= threshold
    return GateResult(
        name,
        "pass" if ok else "fail",
        delta,
        threshold,
        f"test {cfg.metric} {candidate:.4f} vs champion {best:.4f} in {environment}{basis} (delta {delta:+.4f}, "
        f"allowed >= {threshold:+.4f})" + ("" if ok else ": the candidate would regress what users get"),
    )


def onnx_parity(metadata: dict[str, Any] | None, cfg: GateConfig) -> GateResult:
    name, threshold = "onnx-parity", cfg.parity_atol
    parity = metadata.get("parity") if metadata else None
    if not isinstance(parity, dict):
        return GateResult(
            name, "fail", None, threshold, "the export bundle has no parity check: re-export the model"
        )
    diff = _number(parity.get("max_abs_diff"))
    same = parity.get("labels_identical") is True
    if diff is None:
        return GateResult(name, "fail", None, threshold, "parity.max_abs_diff is missing or not a number")
    ok = diff <= threshold and same
    return GateResult(
        name,
        "pass" if ok else "fail",
        diff,
        threshold,
        f"max |ONNX - PyTorch| logits {diff:.2e} on {parity.get('n_texts', '?')} texts, labels "
        + ("identical" if same else "DIFFER")
        + ("" if ok else ": the exported graph does not compute what was evaluated; fix the export"),
    )


def int8_accuracy(metadata: dict[str, Any] | None, cfg: GateConfig) -> GateResult:
    name, threshold = "int8-accuracy", cfg.max_int8_accuracy_drop
    quant = metadata.get("quantization") if metadata else None
    if not quant:
        return GateResult(name, "not_applicable", None, threshold, "no int8 model in the bundle")
    fp32, int8 = _number(quant.get("accuracy_fp32")), _number(quant.get("accuracy_int8"))
    if fp32 is None or int8 is None:
        return GateResult(name, "fail", None, threshold, "quantization lacks accuracy_fp32/accuracy_int8")
    drop = round(fp32 - int8, 6)
    ok = drop <= threshold
    return GateResult(
        name,
        "pass" if ok else "fail",
        drop,
        threshold,
        f"int8 accuracy {int8:.4f} vs fp32 {fp32:.4f} (drop {drop:+.4f})"
        + ("" if ok else ": ship fp32 or calibrate the quantization"),
    )


def same_dataset(
    metrics: dict[str, Any], metadata: dict[str, Any] | None, build_record: dict[str, Any] | None
) -> GateResult:
    """The metrics, the exported bundle and (if built) the serving image all come from one dataset manifest."""
    name = "same-dataset"
    seen = {"metrics.json": metrics.get("dataset_manifest_sha256")}
    if metadata is not None:
        seen["bundle metadata.json"] = metadata.get("dataset_manifest_sha256")
    serving = ((build_record or {}).get("images") or {}).get("serving") or {}
    if serving.get("dataset_manifest_sha256"):
        seen["serving image"] = serving["dataset_manifest_sha256"]
    values = {v for v in seen.values()}
    reference = seen["metrics.json"]
    ok = len(values) == 1 and isinstance(reference, str) and bool(reference)
    detail = ", ".join(f"{k}: {str(v)[:12] if v else 'missing'}" for k, v in seen.items())
    return GateResult(
        name,
        "pass" if ok else "fail",
        reference,
        "one dataset manifest hash",
        detail + ("" if ok else ": evaluate, export and image must come from the same training run"),
    )


def _results(loadtest: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    rows = (loadtest or {}).get("results")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        return None
    return rows


def latency_slo(loadtest: dict[str, Any] | None, env: EnvironmentConfig) -> GateResult:
    name, threshold = "latency-slo", env.slo_p99_ms
    rows = _results(loadtest)
    if rows is None:
        return GateResult(
            name, "fail", None, threshold, "no load test results: run `python -m serving loadtest --out FILE`"
        )
    p99s = [(_number(r.get("p99_ms")), r.get("concurrency")) for r in rows]
    if any(p is None for p, _ in p99s):
        return GateResult(name, "fail", None, threshold, "a load test row has no numeric p99_ms")
    worst, at = max((p, c) for p, c in p99s if p is not None)
    ok = worst <= threshold
    return GateResult(
        name,
        "pass" if ok else "fail",
        worst,
        threshold,
        f"worst p99 {worst:.1f} ms (at concurrency {at}) vs SLO {threshold:.0f} ms"
        + ("" if ok else ": make the model faster (int8, shorter max_length) or scale out"),
    )


def loadtest_errors(loadtest: dict[str, Any] | None, cfg: GateConfig) -> GateResult:
    name, threshold = "loadtest-errors", cfg.max_loadtest_errors
    rows = _results(loadtest)
    if rows is None:
        return GateResult(
            name, "fail", None, threshold, "no load test results: run `python -m serving loadtest --out FILE`"
        )
    # A row without its counts is no evidence of zero errors (serving.loadtest always writes both).
    counts = [(_number(r.get("errors")), _number(r.get("requests"))) for r in rows]
    if any(e is None or n is None for e, n in counts):
        return GateResult(name, "fail", None, threshold, "a load test row has no numeric errors/requests")
    errors = int(sum(e for e, _ in counts if e is not None))
    requests = int(sum(n for _, n in counts if n is not None))
    ok = errors <= threshold and requests > 0
    return GateResult(
        name,
        "pass" if ok else "fail",
        errors,
        threshold,
        f"{errors} failed of {requests} requests" + ("" if ok else ": the server must answer every request"),
    )


def policy_clean(
    report: dict[str, Any] | None,
    env: EnvironmentConfig,
    plan_sha256_now: str | None = None,
    *,
    plan_note: str | None = None,
    waivers_now: tuple[str | None, str | None] | None = None,
    today: dt.date | None = None,
) -> GateResult:
    """`plan_sha256_now`: the hash of the plan file the report names, as it is now (None: not here to compare,
    `plan_note` says why; the gate judges the report as it is, and its detail says it could not check staleness).
    `waivers_now`: the same for the waivers file that judged it (evidence.waivers_now, which load_evidence
    computes; None: not compared). `today`: the date a waiver's end is judged on (None: today in UTC): a waived
    finding whose waiver has ended is a violation again, whatever the report, written before, says."""
    name = "policy-clean"

    def fail(detail: str, measured: Any = None) -> GateResult:
        return GateResult(name, "fail", measured, 0, detail)

    if report is None:
        return fail(
            f"no policy report for stack {env.stack}: run `make policy` (reports/policy/{env.stack}.json)"
        )
    if report.get("stack") != env.stack:
        return fail(f"the policy report is for stack {report.get('stack')!r}, not {env.stack!r}")
    if plan_sha256_now is not None and report.get("plan_sha256") != plan_sha256_now:
        return fail(
            f"the policy report is stale: its plan {report.get('plan')} changed since it was analysed "
            "(plan_sha256 differs): run `make policy` on the plan you deploy"
        )
    waivers_sha256_now, waivers_note = waivers_now or (None, None)
    if waivers_sha256_now is not None and report.get("waivers_sha256") != waivers_sha256_now:
        return fail(
            f"the policy report is stale: its waivers file {report.get('waivers_path')} changed since it was analysed "
            "(waivers_sha256 differs: a waiver added, revoked or narrowed): run `make policy`"
        )
    violations = report.get("violations")
    if not isinstance(violations, list):
        return fail("the policy report has no `violations` list")
    today = today or utc_today()
    lapsed = lapsed_waivers(report.get("waived"), today)
    if lapsed:
        shown = "; ".join(
            f"waiver #{w.get('id')} for {v.get('policy')} on {v.get('urn') or '(stack)'} ended on {w.get('expires')}"
            for v, w in lapsed[:5]
        )
        more = f" and {len(lapsed) - 5} more" if len(lapsed) > 5 else ""
        return fail(
            f"{len(lapsed)} mandatory finding(s) in stack {env.stack} were waived by a waiver that has ended by "
            f"{today}: {shown}{more}; fix them or renew the waiver (policies/waivers.yaml), then run `make policy`",
            len(lapsed),
        )
    mandatory = [v for v in violations if isinstance(v, dict) and v.get("enforcement") == "mandatory"]
    names = sorted({str(v.get("policy")) for v in mandatory})
    return GateResult(
        name,
        "pass" if not mandatory else "fail",
        len(mandatory),
        0,
        f"{len(mandatory)} mandatory and {len(violations) - len(mandatory)} advisory violation(s) in stack {env.stack}, "
        f"{len(report.get('waived') or [])} waived"
        + (f": fix {', '.join(names)}" if mandatory else "")
        + (f"; not checked against the current plan: {plan_note}" if plan_note else "")
        + (f"; not checked against current waivers: {waivers_note}" if waivers_note else ""),
    )


def images_pinned(
    build_record: dict[str, Any] | None, env: EnvironmentConfig, *, local_run: bool
) -> GateResult:
    """Both images must be referenced by content digest, never by a mutable tag, and pushed.

    A local run (`make demo`) has no registry: a digest of a locally built image (`make
    images` without --push) is accepted as the lineage, and without any build record the
    gate is not_applicable; both only where the environment allows local runs, and the
    record then says the candidate is not deployable. A digest is never invented.
    """
    name, threshold = "images-pinned", "sha256 digest for training and serving images, pushed"
    images = (build_record or {}).get("images") or {}
    digests = {k: (images.get(k) or {}).get("digest") for k in IMAGES}
    pinned = [k for k, v in digests.items() if isinstance(v, str) and DIGEST.match(v)]
    unpushed = [k for k in pinned if (images.get(k) or {}).get("pushed") is False]
    measured = {k: v for k, v in digests.items() if v} or None
    local_ok = local_run and env.allow_local_run
    if len(pinned) == len(IMAGES) and not unpushed:
        return GateResult(name, "pass", measured, threshold, "training and serving images pinned by digest")
    if len(pinned) == len(IMAGES) and local_ok:
        return GateResult(
            name, "pass", measured, threshold,
            f"local run: pinned by local digest, {', '.join(unpushed)} not pushed (not deployable)",
        )  # fmt: skip
    if local_ok:
        missing = ", ".join(k for k in IMAGES if k not in pinned)
        return GateResult(
            name,
            "not_applicable",
            measured,
            threshold,
            f"local run: no image digest for {missing} (no `make images`); the candidate is recorded as not deployable",
        )
    if len(pinned) == len(IMAGES):
        return GateResult(
            name, "fail", measured, threshold,
            f"{', '.join(unpushed)} image(s) built but not pushed: run `make images IMAGES_ARGS=--push`",
        )  # fmt: skip
    missing = ", ".join(k for k in IMAGES if k not in pinned)
    fix = (
        "run `make images IMAGES_ARGS=--push`"
        if build_record
        else "no build record: run `make images IMAGES_ARGS=--push`"
    )
    return GateResult(name, "fail", measured, threshold, f"{missing} image(s) not pinned by digest: {fix}")


def approval(
    record: dict[str, Any] | None, env: EnvironmentConfig, *, requested_by: str | None, now: dt.datetime | None = None
) -> GateResult:  # fmt: skip
    """Four-eyes: the approver is named, approved this environment, and is not who asked for the promotion."""
    name, threshold = "approval", "recorded approval by someone other than the requester"
    if not env.require_approval:
        return GateResult(name, "not_applicable", None, threshold, f"{env.name} needs no approval")
    # Four eyes need to know both pairs: without the requester the check would pass for anyone.
    if not (requested_by or "").strip():
        return GateResult(
            name,
            "fail",
            None,
            threshold,
            f"{env.name} requires an approval: pass --requested-by (who promotes)",
        )
    if record is None:
        return GateResult(
            name, "fail", None, threshold, f"{env.name} requires an approval: pass --approval FILE"
        )
    approver = str(record.get("approver") or "").strip()
    problems = []
    if not approver:
        problems.append("no approver named")
    if record.get("environment") != env.name:
        problems.append(f"approval is for {record.get('environment')!r}, not {env.name!r}")
    if when := approved_at_problem(record.get("approved_at"), now or dt.datetime.now(dt.UTC)):
        problems.append(when)
    if approver and approver.casefold() == str(requested_by).strip().casefold():
        problems.append(f"{approver} cannot approve their own promotion")
    return GateResult(
        name,
        "fail" if problems else "pass",
        approver or None,
        threshold,
        "; ".join(problems) if problems else f"approved by {approver} at {record.get('approved_at')}",
    )


def decide(results: list[GateResult]) -> tuple[str, list[str]]:
    """`promote` only if no gate failed; reasons name every failed and every not-applicable gate."""
    failed = [r for r in results if r.status == "fail"]
    reasons = [f"{r.name}: {r.detail}" for r in failed]
    passed = sum(r.status == "pass" for r in results)
    skipped = [r for r in results if r.status == "not_applicable"]
    if not failed:
        reasons.insert(0, f"all {passed} applicable gates passed")
    reasons += [f"{r.name} not applicable: {r.detail}" for r in skipped]
    return ("reject" if failed else "promote"), reasons
