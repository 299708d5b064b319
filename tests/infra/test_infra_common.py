"""What every committed stack must have, whatever the cloud (the issue's "done when")."""

from __future__ import annotations

import json

import pytest
from infra_fixtures import STACKS, Plan
from infra_sdk import tag_property

from infra import plan as planner
from infra.config import EU_REGIONS, REQUIRED_TAGS
from infra.shape import GPU_TAINT_KEY, POOL_LABEL

KEY_TYPES = {
    "aws": "aws:kms/key:Key",
    "gcp": "gcp:kms/cryptoKey:CryptoKey",
    "azure": "azure-native:keyvault:Key",
}
REGISTRY_TYPES = {
    "aws": "aws:ecr/repository:Repository",
    "gcp": "gcp:artifactregistry/repository:Repository",
    "azure": "azure-native:containerregistry:Registry",
}
CLUSTER_TYPES = {
    "aws": "aws:eks/cluster:Cluster",
    "gcp": "gcp:container/cluster:Cluster",
    "azure": "azure-native:containerservice:ManagedCluster",
}
BUDGET_TYPES = {
    "aws": "aws:budgets/budget:Budget",
    "gcp": "gcp:billing/budget:Budget",
    "azure": "azure-native:consumption:Budget",
}
AUDIT_TYPES = {
    "aws": "aws:cloudtrail/trail:Trail",
    "gcp": "gcp:projects/iAMAuditConfig:IAMAuditConfig",
    "azure": "azure-native:monitor:DiagnosticSetting",
}


@pytest.mark.parametrize("stack", STACKS)
def test_plan_document_shape(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    assert set(p.doc) == {"stack", "cloud", "project", "environment", "region", "resources", "outputs"}
    assert (p["stack"], p["project"]) == (stack, "eu-ml-platform")
    for r in p.resources:
        assert set(r) == {
            "urn",
            "type",
            "name",
            "custom",
            "inputs",
            "parent",
            "dependencies",
            "provider",
            "protect",
            "retainOnDelete",
            "ignoreChanges",
            "deleteBeforeReplace",
            "aliases",
            "source",  # {"file", "line"} of the declaring program line (policy SARIF locations)
        }
        assert isinstance(r["retainOnDelete"], bool) and isinstance(r["deleteBeforeReplace"], bool)
        assert isinstance(r["ignoreChanges"], list) and isinstance(r["aliases"], list)
        assert r["urn"].startswith(f"urn:pulumi:{stack}::eu-ml-platform::") and r["urn"].endswith(
            f"::{r['name']}"
        )
        assert (
            r["parent"] is None
            or r["parent"] in p.by_urn
            or r["parent"].endswith("pulumi:pulumi:Stack::eu-ml-platform-" + stack)
        )
        assert all(d in p.by_urn for d in r["dependencies"]), r["name"]
        if r["provider"] is not None:
            assert r["provider"].split("::")[-1] == planner.UNKNOWN  # provider id unknown at preview
            assert "::".join(r["provider"].split("::")[:-1]) in p.by_urn


# The Azure alarm: its action group is processed in an EU region offering regional action groups, and
# the metric alert rule only exists in `global` (a reviewed waiver in policies/waivers.yaml).
AZURE_ALARM_LOCATIONS = {
    "azure-native:monitor:ActionGroup": {"swedencentral", "germanywestcentral"},
    "azure-native:monitor:MetricAlert": {"global"},
}


@pytest.mark.parametrize("stack", STACKS)
def test_every_region_is_in_the_eu(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    assert p["region"] in EU_REGIONS[p["cloud"]]
    regions = set()
    for r in p.resources:
        inputs = r["inputs"]
        if r["type"] in AZURE_ALARM_LOCATIONS:  # infra/azure/alarms.py: documented, policy-checked/waived
            assert inputs["location"] in AZURE_ALARM_LOCATIONS[r["type"]], r["name"]
            continue
        for key in ("region", "location"):
            if isinstance(inputs.get(key), str):
                regions.add(inputs[key].lower())
    assert regions and regions <= {p["region"].lower()}, regions


@pytest.mark.parametrize("stack", STACKS)
def test_keys_rotate_within_90_days_and_prod_protects_them(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    keys = p.of_type(KEY_TYPES[p["cloud"]])
    # Azure has a second key for AKS's KMS plugin (its versions must not expire: test_infra_azure).
    assert len(keys) == (2 if p["cloud"] == "azure" else 1)
    for key in keys:
        inputs = key["inputs"]
        rotation = {
            "aws": lambda i: i["enableKeyRotation"] is True and i["rotationPeriodInDays"] == 90.0,
            "gcp": lambda i: i["rotationPeriod"] == "7776000s",
            "azure": lambda i: (
                i["properties"]["rotationPolicy"]["lifetimeActions"][0]
                == {"action": {"type": "rotate"}, "trigger": {"timeAfterCreate": "P90D"}}
            ),
        }[p["cloud"]]
        assert rotation(inputs), inputs
        assert key["protect"] is (p["environment"] == "prod")


@pytest.mark.parametrize("stack", STACKS)
def test_platform_pieces_present(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    cloud = p["cloud"]
    assert p.of_type(REGISTRY_TYPES[cloud])
    assert len(p.of_type(CLUSTER_TYPES[cloud])) == 1
    assert len(p.of_type(BUDGET_TYPES[cloud])) == 1
    assert p.of_type(AUDIT_TYPES[cloud])
    for token in (
        "kubernetes:apps/v1:Deployment",
        "kubernetes:autoscaling/v2:HorizontalPodAutoscaler",
        "kubernetes:policy/v1:PodDisruptionBudget",
    ):
        assert len(p.of_type(token)) == 1, token
    services = {r["inputs"]["metadata"]["name"] for r in p.of_type("kubernetes:core/v1:Service")}
    assert services == {"triton", "alertmanager"}


@pytest.mark.parametrize("stack", STACKS)
def test_required_tags_on_every_taggable_resource(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    checked = 0
    for r in p.iter_custom():
        prop = tag_property(r["type"])
        if prop is None or r["type"].startswith("pulumi:providers:"):
            continue
        tags = r["inputs"].get(prop) or {}
        missing = set(REQUIRED_TAGS) - set(tags)
        assert not missing, f"{r['type']} {r['name']} lacks {missing}"
        assert tags["environment"] == p["environment"]
        checked += 1
    assert checked >= 8


@pytest.mark.parametrize("stack", STACKS)
def test_outputs_a_job_submitter_needs(plans: dict[str, Plan], stack: str) -> None:
    out = plans[stack]["outputs"]
    scheme = {"aws": "s3://", "gcp": "gs://", "azure": "https://"}[plans[stack]["cloud"]]
    assert set(out["bucket_uris"]) == {"raw", "splits", "checkpoints", "models", "logs"}
    assert out["checkpoint_bucket_uri"] == out["bucket_uris"]["checkpoints"]
    assert out["checkpoint_bucket_uri"].startswith(scheme)
    assert set(out["image_repositories"]) == {"training", "serving"}
    assert out["gpu_pool"]["taint"] == "nvidia.com/gpu=present:NoSchedule"
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in out["gpu_pool"]["taints"]
    assert out["gpu_pool"]["node_label"] == {POOL_LABEL: "gpu"}
    assert {"key": GPU_TAINT_KEY, "operator": "Equal", "value": "present", "effect": "NoSchedule"} in out[
        "pool_selectors"
    ]["gpu"]["tolerations"]
    assert (out["trainer_namespace"], out["trainer_service_account"]) == ("training", "trainer")
    assert out["service_accounts"]["server"] == {"namespace": "serving", "name": "triton"}
    assert out["serving_endpoint"]["model"] == "sentiment"
    # The kubeconfig is a secret: the plan carries only the redacted envelope.
    assert out["kubeconfig"] == {planner.SECRET_SIG_KEY: planner.SECRET_SIG, "value": planner.REDACTED}
    assert "[secret]" not in json.dumps({k: v for k, v in out.items() if k != "kubeconfig"})


@pytest.mark.parametrize("stack", STACKS)
def test_triton_deployment_probes_and_hardening(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    spec = p.one("kubernetes:apps/v1:Deployment")["inputs"]["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert c["startupProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    # Model load may take minutes: the startup window must be long before liveness kills the pod.
    assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] >= 300
    assert {port["containerPort"] for port in c["ports"]} == {8000.0, 8001.0, 8002.0}
    sc = c["securityContext"]
    assert (sc["runAsNonRoot"], sc["readOnlyRootFilesystem"], sc["allowPrivilegeEscalation"]) == (
        True,
        True,
        False,
    )
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert set(c["resources"]["requests"]) == {"cpu", "memory"} and "memory" in c["resources"]["limits"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["serviceAccountName"] == "triton"
    assert spec["nodeSelector"] == {POOL_LABEL: "serving"}
    image = c["image"]
    if p["environment"] != "dev":
        assert "@sha256:" in image, image


@pytest.mark.parametrize("stack", STACKS)
def test_hpa_scales_on_queue_time_within_the_configured_bounds(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    cfg = planner.load_stack(stack)
    spec = p.one("kubernetes:autoscaling/v2:HorizontalPodAutoscaler")["inputs"]["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "triton"}
    assert (spec["minReplicas"], spec["maxReplicas"]) == (cfg.serving.min_replicas, cfg.serving.max_replicas)
    (metric,) = spec["metrics"]
    assert metric["type"] == "Pods"
    assert metric["pods"]["metric"]["name"] == "triton_queue_time_per_request_us"
    assert metric["pods"]["target"] == {
        "type": "AverageValue",
        "averageValue": str(cfg.serving.queue_time_target_us),
    }
    # Serving measured saturation at 65-823 ms of queue per request and 2 ms while keeping up.
    assert metric["pods"]["target"]["averageValue"] == "20000"
    # The adapter rule that serves the metric is declared in the same stack: the endpoint model only, every
    # finished request in the denominator, a window of four scrapes (the scrape interval is 15 s).
    adapter = p.one("kubernetes:helm.sh/v3:Release", "-prometheus-adapter")["inputs"]
    (rule,) = adapter["values"]["rules"]["custom"]
    assert rule == {
        "seriesQuery": 'nv_inference_queue_duration_us{namespace!="",pod!=""}',
        "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
        "name": {"matches": "^nv_inference_queue_duration_us$", "as": "triton_queue_time_per_request_us"},
        "metricsQuery": (
            'sum by (<<.GroupBy>>)(rate(nv_inference_queue_duration_us{model="sentiment",<<.LabelMatchers>>}[1m]))'
            " / clamp_min(sum by (<<.GroupBy>>)(rate({__name__=~"
            '"nv_inference_request_success|nv_inference_request_failure",model="sentiment",<<.LabelMatchers>>}'
            "[1m])), 0.001)"
        ),
    }
    assert adapter["values"]["rules"]["default"] is False
    prometheus = p.one("kubernetes:helm.sh/v3:Release", "-prometheus")["inputs"]["values"]["server"]
    assert prometheus["global"]["scrape_interval"] == "15s"
    hpa = p.one("kubernetes:autoscaling/v2:HorizontalPodAutoscaler")
    assert p.one("kubernetes:helm.sh/v3:Release", "-prometheus-adapter")["urn"] in hpa["dependencies"]
    pdb = p.one("kubernetes:policy/v1:PodDisruptionBudget")["inputs"]["spec"]
    assert pdb["maxUnavailable"] == 1.0


@pytest.mark.parametrize("stack", STACKS)
def test_network_policy_and_service(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    assert p.one("kubernetes:core/v1:Service", "-serving-service")["inputs"]["spec"]["type"] == "ClusterIP"
    policies = {
        r["inputs"]["metadata"]["name"]: r["inputs"]["spec"]
        for r in p.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    }
    assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    ingress_ports = {port["port"] for rule in policies["triton"]["ingress"] for port in rule["ports"]}
    assert ingress_ports == {8000.0, 8001.0, 8002.0}


@pytest.mark.parametrize("stack", STACKS)
def test_training_support_and_ci_rbac(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    cfg = planner.load_stack(stack)
    sas = {
        (r["inputs"]["metadata"]["namespace"], r["inputs"]["metadata"]["name"])
        for r in p.of_type("kubernetes:core/v1:ServiceAccount")
    }
    # The budget cost job's service account, on every cloud (tests/infra/test_infra_budget_job.py).
    budget = {("cost", "budget")}
    assert sas == {
        ("training", "trainer"),
        ("serving", "triton"),
        ("ci", "ci-deployer"),
        ("drift", "monitor"),
        *budget,
    }
    quota = p.one("kubernetes:core/v1:ResourceQuota")["inputs"]["spec"]["hard"]
    assert quota == {
        "requests.nvidia.com/gpu": str(cfg.cluster.gpu_pool.max_nodes * cfg.cluster.gpu_pool.gpus_per_node)
    }
    role = p.one("kubernetes:rbac.authorization.k8s.io/v1:Role", "-ci-role")["inputs"]
    assert role["metadata"]["namespace"] == "serving"
    writes = [rule for rule in role["rules"] if {"patch", "update"} & set(rule["verbs"])]
    assert writes == [
        {
            "apiGroups": ["apps"],
            "resources": ["deployments"],
            "resourceNames": ["triton"],
            "verbs": ["get", "patch", "update"],
        }
    ]
    binding = p.one("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "-ci-binding")["inputs"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "ci-deployer", "namespace": "ci"}]
