"""Each gate passes the good fixture and rejects a candidate that fails it."""

from __future__ import annotations

import copy

import pytest
from promotion_fixtures import build_record, bundle_metadata, loadtest, metrics, policy_report

from promotion import gates
from promotion.config import load_config

CFG = load_config()
DEV, PROD = CFG.environment("dev"), CFG.environment("prod")


def test_beats_baseline() -> None:
    ok = gates.beats_baseline(metrics(0.88, 0.83), CFG.gates)
    assert ok.status == "pass" and ok.measured == pytest.approx(0.05)
    tie = gates.beats_baseline(metrics(0.835, 0.83), CFG.gates)  # beats it, but by less than the margin
    assert tie.status == "fail" and tie.measured == pytest.approx(0.005)
    missing = metrics()
    del missing["baselines"]["tfidf_logreg"]
    assert gates.beats_baseline(missing, CFG.gates).status == "fail"


def test_not_worse_than_champion() -> None:
    first = gates.not_worse_than_champion(metrics(0.80), None, CFG.gates, environment="dev")
    assert first.status == "not_applicable"
    within = gates.not_worse_than_champion(metrics(0.878), metrics(0.88), CFG.gates, environment="dev")
    assert within.status == "pass"
    worse = gates.not_worse_than_champion(metrics(0.87), metrics(0.88), CFG.gates, environment="dev")
    assert worse.status == "fail" and worse.measured == pytest.approx(-0.01)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda m: m["parity"].update(max_abs_diff=3e-3),
        lambda m: m["parity"].update(labels_identical=False),
        lambda m: m.pop("parity"),
        lambda m: m["parity"].update(max_abs_diff=float("nan")),
    ],
    ids=["diff-too-large", "labels-differ", "no-parity", "nan"],
)
def test_onnx_parity_rejects(mutate) -> None:
    assert gates.onnx_parity(bundle_metadata(), CFG.gates).status == "pass"
    bad = bundle_metadata()
    mutate(bad)
    assert gates.onnx_parity(bad, CFG.gates).status == "fail"
    assert gates.onnx_parity(None, CFG.gates).status == "fail"


def test_int8_accuracy() -> None:
    assert gates.int8_accuracy(bundle_metadata(), CFG.gates).status == "pass"
    bad = bundle_metadata()
    bad["quantization"]["accuracy_int8"] = 0.80
    assert gates.int8_accuracy(bad, CFG.gates).status == "fail"
    none = bundle_metadata() | {"quantization": None}
    assert gates.int8_accuracy(none, CFG.gates).status == "not_applicable"


def test_same_dataset() -> None:
    assert gates.same_dataset(metrics(), bundle_metadata(), build_record()).status == "pass"
    other = bundle_metadata() | {"dataset_manifest_sha256": "b" * 64}
    assert gates.same_dataset(metrics(), other, build_record()).status == "fail"
    image = build_record()
    image["images"]["serving"]["dataset_manifest_sha256"] = "c" * 64
    assert gates.same_dataset(metrics(), bundle_metadata(), image).status == "fail"


def test_latency_slo() -> None:
    ok = gates.latency_slo(loadtest(), DEV)
    assert ok.status == "pass" and ok.measured == 90.0
    slow = loadtest()
    slow["results"][1]["p99_ms"] = DEV.slo_p99_ms + 1
    result = gates.latency_slo(slow, DEV)
    assert result.status == "fail" and "concurrency 8" in result.detail
    assert gates.latency_slo(None, DEV).status == "fail"
    assert gates.latency_slo({"results": []}, DEV).status == "fail"
    # A level where every request failed: the load test writes null latencies (serving/loadtest.py).
    failed = loadtest()
    failed["results"][1].update(p50_ms=None, p95_ms=None, p99_ms=None)
    assert gates.latency_slo(failed, DEV).status == "fail"


def test_loadtest_errors() -> None:
    assert gates.loadtest_errors(loadtest(), CFG.gates).status == "pass"
    bad = loadtest()
    bad["results"][0]["errors"] = 1
    result = gates.loadtest_errors(bad, CFG.gates)
    assert result.status == "fail" and result.measured == 1
    no_requests = loadtest()
    for row in no_requests["results"]:
        row["requests"] = 0
    assert gates.loadtest_errors(no_requests, CFG.gates).status == "fail"
    # A row without its counts is not zero errors; a count that is not a number is no count.
    for field, value in (("errors", None), ("requests", None), ("errors", "0")):
        partial = loadtest()
        partial["results"][0].pop(field) if value is None else partial["results"][0].update({field: value})
        result = gates.loadtest_errors(partial, CFG.gates)
        assert result.status == "fail" and "no numeric errors/requests" in result.detail, (field, value)


def test_policy_clean() -> None:
    assert gates.policy_clean(policy_report("dev"), DEV).status == "pass"  # advisory only
    bad = policy_report("dev")
    bad["violations"].append(
        {
            "policy": "s3-no-public-read",
            "urn": "u",
            "message": "m",
            "enforcement": "mandatory",
            "severity": "high",
        }
    )
    result = gates.policy_clean(bad, DEV)
    assert result.status == "fail" and result.measured == 1 and "s3-no-public-read" in result.detail
    assert gates.policy_clean(policy_report("prod"), DEV).status == "fail"  # another stack's report
    assert gates.policy_clean(None, DEV).status == "fail"


def test_images_pinned() -> None:
    assert gates.images_pinned(build_record(), PROD, local_run=False).status == "pass"
    tag_only = build_record()
    tag_only["images"]["serving"]["digest"] = None
    assert gates.images_pinned(tag_only, PROD, local_run=False).status == "fail"
    not_sha = copy.deepcopy(build_record())
    not_sha["images"]["training"]["digest"] = "latest"
    assert gates.images_pinned(not_sha, DEV, local_run=False).status == "fail"
    assert gates.images_pinned(None, DEV, local_run=False).status == "fail"
    # A local run is not applicable only where the environment allows it.
    assert gates.images_pinned(None, DEV, local_run=True).status == "not_applicable"
    assert gates.images_pinned(None, PROD, local_run=True).status == "fail"


def test_images_must_be_pushed_outside_local_runs() -> None:
    local = build_record()
    for image in local["images"].values():
        image["pushed"] = False  # `make images` without --push: a local digest only
    result = gates.images_pinned(local, PROD, local_run=False)
    assert result.status == "fail" and "not pushed" in result.detail
    assert gates.images_pinned(local, DEV, local_run=True).status == "pass"
    pushed = build_record()
    for image in pushed["images"].values():
        image["pushed"] = True
    assert gates.images_pinned(pushed, PROD, local_run=False).status == "pass"


def test_approval() -> None:
    good = {
        "approver": "bob",
        "approved_at": "2026-12-02T10:00:00Z",
        "environment": "prod",
        "reference": "run 7",
    }
    assert gates.approval(None, DEV, requested_by="alice").status == "not_applicable"
    assert gates.approval(good, PROD, requested_by="alice").status == "pass"
    assert gates.approval(None, PROD, requested_by="alice").status == "fail"
    assert gates.approval(good, PROD, requested_by="bob").status == "fail"  # four eyes
    assert gates.approval(good | {"environment": "staging"}, PROD, requested_by="alice").status == "fail"
    assert gates.approval(good | {"approver": " "}, PROD, requested_by="alice").status == "fail"
    # Four eyes without knowing who promotes is no check; names compare without case.
    missing = gates.approval(good, PROD, requested_by=None)
    assert missing.status == "fail" and "--requested-by" in missing.detail
    assert gates.approval(good, PROD, requested_by=" ").status == "fail"
    assert gates.approval(good, PROD, requested_by="Bob").status == "fail"


def test_decide() -> None:
    passing = [gates.beats_baseline(metrics(), CFG.gates), gates.approval(None, DEV, requested_by=None)]
    decision, reasons = gates.decide(passing)
    assert decision == "promote"
    assert reasons[0] == "all 1 applicable gates passed" and reasons[1].startswith("approval not applicable")
    decision, reasons = gates.decide([*passing, gates.latency_slo(None, DEV)])
    assert decision == "reject" and reasons[0].startswith("latency-slo: no load test")
