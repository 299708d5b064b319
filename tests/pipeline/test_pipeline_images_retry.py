"""The registry client (pipeline/images.py, also containers' push check) through a registry's passing trouble:
a 503 during a rolling restart or a 429 under a burst of pods is retried; a missing tag or a refusal is not, and
its status is on the error (containers' push decides "no such tag yet" by it)."""

from __future__ import annotations

import hashlib
import http.server
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline import images
from pipeline.registry_auth import RegistryError
from tests.httpd import http_server

pytestmark = pytest.mark.integration
MANIFEST = b'{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json"}'


class _Registry(http.server.BaseHTTPRequestHandler):
    """Answers each GET with the next status of `script` (the last one repeats); 200 serves MANIFEST."""

    script: list[int] = []
    seen: list[int] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        status = self.script[min(len(self.seen), len(self.script) - 1)]
        self.seen.append(status)
        body = MANIFEST if status == 200 else b'{"errors": [{"code": "UNAVAILABLE"}]}'
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        if status == 429:
            self.send_header("Retry-After", "0")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setattr(images, "RETRY_PAUSE_S", 0.05)
    handler = type("Handler", (_Registry,), {"script": [], "seen": []})
    with http_server(handler) as served:
        yield {"host": served.address, "handler": handler}


@pytest.mark.parametrize("trouble", [503, 502, 429])
def test_a_passing_error_is_retried_and_the_manifest_read(registry: dict[str, Any], trouble: int) -> None:
    registry["handler"].script[:] = [trouble, trouble, 200]
    digest = images.manifest_digest(registry["host"], "mlp/serving", "0.1.0")
    assert digest == "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
    assert registry["handler"].seen == [trouble, trouble, 200]


def test_trouble_that_lasts_is_an_error_with_its_status_after_the_last_try(registry: dict[str, Any]) -> None:
    registry["handler"].script[:] = [503]
    with pytest.raises(RegistryError) as err:
        images.manifest_digest(registry["host"], "mlp/serving", "0.1.0")
    assert err.value.status == 503 and f"{images.RETRIES} tries" in str(err.value)
    assert len(registry["handler"].seen) == images.RETRIES


@pytest.mark.parametrize("status", [404, 400])
def test_a_missing_tag_or_a_bad_request_is_not_retried_and_says_its_status(
    registry: dict[str, Any], status: int
) -> None:
    registry["handler"].script[:] = [status, 200]
    with pytest.raises(RegistryError) as err:
        images.manifest_digest(registry["host"], "mlp/serving", "0.1.0")
    assert err.value.status == status and registry["handler"].seen == [status]
