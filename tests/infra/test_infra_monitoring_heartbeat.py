"""monitoring.heartbeatUrl: the dead man's switch the always-firing Watchdog alert pings (monitoring/alerting.py).
A Pulumi secret (the URL is the check's credential): validated (https on 443, which the Alertmanager pod's
NetworkPolicy lets out; http to loopback only, for tests) with a message that says how to set it and never shows the
URL's path; in the plan as the receiver name `heartbeat`, never the URL. Not required by the policy pack."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from infra_fixtures import Plan
from test_infra_config import raw

from infra import config
from infra import plan as planner
from infra.config import ConfigError
from infra.k8s import monitoring
from infra.plan_mocks import UNKNOWN

TOKEN = "5f0c6a1e-7b2d-4e09-9a51-secret"
HEARTBEAT = f"https://hc-ping.com/{TOKEN}"
HOW = "pulumi config set --secret --path monitoring.heartbeatUrl https://"


def with_heartbeat(url: str, stack: str = "dev") -> dict[str, Any]:
    values = copy.deepcopy(raw(stack))
    values["monitoring"] = {**values.get("monitoring", {}), "heartbeatUrl": url}
    return values


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"http://hc-ping.com/{TOKEN}", "'http://hc-ping.com/...'"),  # in clear over the internet
        (f"http://10.0.4.7:8080/{TOKEN}", "'http://10.0.4.7/...'"),  # private is not loopback
        (f"https://hc-ping.com:8443/{TOKEN}", "'https://hc-ping.com/...'"),  # the NetworkPolicy's 443 only
        (f"https://hc-ping.com:https/{TOKEN}", "'https://hc-ping.com/...'"),
        (f"ftp://hc-ping.com/{TOKEN}", "'ftp://hc-ping.com/...'"),
        (f"hc-ping.com/{TOKEN}", "'(not a URL)'"),
        (f"https:///{TOKEN}", "'https:///...'"),
    ],
)  # fmt: skip
def test_a_heartbeat_url_alertmanager_could_not_or_should_not_ping_is_refused_without_its_secret(
    url: str, shown: str
) -> None:
    with pytest.raises(ConfigError) as err:
        config.parse(with_heartbeat(url), stack="dev")
    message = str(err.value)
    assert err.value.key == "monitoring.heartbeatUrl" and message.startswith("monitoring.heartbeatUrl: ")
    assert shown in message and "https on port 443" in message and HOW in message
    assert TOKEN not in message and TOKEN not in repr(err.value.value)


@pytest.mark.parametrize(
    "url",
    [HEARTBEAT, f"https://hc-ping.com:443/{TOKEN}", "http://127.0.0.1:8080/ping", "http://localhost:9/ping",
     "http://[::1]:9/ping", UNKNOWN],  # UNKNOWN: a `secure:` value in the offline plan
)  # fmt: skip
def test_an_https_or_loopback_heartbeat_url_is_accepted_as_a_secret(url: str) -> None:
    cfg = config.parse(with_heartbeat(url), stack="dev")
    assert cfg.monitoring.heartbeat_url is not None
    assert cfg.monitoring.heartbeat_url.get_secret_value() == url
    assert url not in repr(cfg) and url not in str(cfg.monitoring.model_dump())
    assert cfg.monitoring.receivers == ("email", "heartbeat")


def test_without_it_there_is_no_heartbeat_receiver() -> None:
    assert planner.load_stack("prod").monitoring.heartbeat_url is None
    assert "heartbeat" not in planner.load_stack("prod").monitoring.receivers


def _routes(document: dict[str, Any], tmp_path: Path, *labels: str) -> str:
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.skip("amtool is missing: apt-get install prometheus-alertmanager")
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(document))
    check = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    routed = subprocess.run(
        [amtool, "config", "routes", "test", f"--config.file={path}", *labels], capture_output=True, text=True
    )
    return routed.stdout.strip()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("stack", "url", "expected"),
    [("dev", HEARTBEAT, HEARTBEAT), ("prod", HEARTBEAT, HEARTBEAT),
     ("dev", UNKNOWN, monitoring.UNKNOWN_HEARTBEAT_URL), ("dev", None, None)],
    ids=["email-only", "with-pager", "secure-offline", "none"],
)  # fmt: skip
def test_the_stacks_alertmanager_config_sends_watchdog_to_the_heartbeat_only(
    stack: str, url: str | None, expected: str | None, tmp_path: Path
) -> None:
    values = with_heartbeat(url, stack) if url else copy.deepcopy(raw(stack))
    document = monitoring.alertmanager_document(config.parse(values, stack=stack))
    watchdog = _routes(document, tmp_path, "alertname=Watchdog", "severity=none", "owner=platform")
    assert watchdog == ("heartbeat" if expected else "discard")
    hooks = [c["url"] for r in document["receivers"] for c in r.get("webhook_configs", [])]
    assert hooks == ([expected] if expected else [])
    # The alerts keep their routes: a warning to email, a page to the pager where the stack has one.
    assert _routes(document, tmp_path, "alertname=ModelInputDrift", "severity=warning") == "email"
    assert _routes(document, tmp_path, "alertname=ServingEndpointDown", "severity=critical") == (
        "pagerduty" if stack == "prod" else "email"
    )


@pytest.fixture(scope="module")
def heartbeat_plan() -> dict[str, Any]:
    """dev's offline plan with a heartbeat URL in clear in its config (as if set without --secret)."""
    config_map = planner.stack_config("dev")
    key = f"{config.PROJECT}:monitoring"
    config_map[key] = json.dumps({**json.loads(config_map.get(key, "{}")), "heartbeatUrl": HEARTBEAT})
    cfg = config.parse(config.project_keys(config_map), stack="dev")
    return planner.run(cfg, config_map)


def test_the_plan_shows_the_heartbeat_receiver_and_never_its_url(heartbeat_plan: dict[str, Any]) -> None:
    text = json.dumps(heartbeat_plan)
    assert TOKEN not in text and "hc-ping.com" not in text
    p = Plan(heartbeat_plan)
    secret = p.one("kubernetes:core/v1:Secret", "-monitoring-alertmanager-config")["inputs"]
    assert secret["metadata"]["annotations"] == {
        "platform.eu-ml/alert-receivers": "email,heartbeat",
        "platform.eu-ml/paging": "false",  # a heartbeat is no pager: the policy pack still asks prod for one
    }
    assert secret["stringData"] == {planner.SECRET_SIG_KEY: planner.SECRET_SIG, "value": planner.REDACTED}
    assert p["outputs"]["alerting"]["receivers"] == ["email", "heartbeat"]


def test_the_plan_output_does_not_count_the_heartbeat_as_a_pager(heartbeat_plan: dict[str, Any]) -> None:
    assert heartbeat_plan["outputs"]["alerting"]["paging"] is False
