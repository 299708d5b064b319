"""`launch --cloud`: the checkpoint and data URIs must be the cloud's own object store (training/launch_uris.py).

Before: `launch --cloud gcp` (or azure) without --checkpoint-uri rendered the aws dev stack's s3:// bucket, and any
other cloud's URI was rendered too; the pod, with only its own cloud's identity, failed with exit 2 after a GPU
node had scaled up and pulled the image."""

from __future__ import annotations

import argparse
import types
from pathlib import Path

import fsspec
import pytest

from training import launch
from training.errors import ConfigError
from training.launch_uris import CHECKPOINT_BUCKETS, DEFAULT_CHECKPOINT_URI


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="training")
    launch.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


def _env(cfg: launch.LaunchConfig) -> dict[str, str]:
    (container,) = launch.render_job(cfg)["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container["env"]}


@pytest.mark.parametrize(
    ("cloud", "bucket"),
    [("gcp", "gs://<org>-mlp-<stack>-checkpoints"), ("azure", "https://<org>mlp<stack>data.blob.core.windows.net/checkpoints")],
)  # fmt: skip
@pytest.mark.parametrize("tune", [False, True], ids=["job", "tune"])
def test_gcp_and_azure_need_their_own_checkpoint_uri_and_are_told_where_it_comes_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cloud: str, bucket: str, tune: bool
) -> None:
    out = tmp_path / "job.yaml"
    argv = ["launch", "--cloud", cloud, "--image", "r.example/training:1.0", "--out", str(out)]
    assert _cli([*argv, *(["--tune"] if tune else [])]) == 2
    err = capsys.readouterr().err
    assert f"'{DEFAULT_CHECKPOINT_URI}' is aws storage (the default" in err, err
    assert f"pass --checkpoint-uri {bucket}/sentiment-train" in err and "checkpoint_bucket_uri" in err, err
    assert not out.exists()


def test_aws_keeps_its_default_checkpoint_uri() -> None:
    assert _env(launch.LaunchConfig())["TRAINING_CHECKPOINT_URI"] == DEFAULT_CHECKPOINT_URI
    assert _env(launch.LaunchConfig(cloud=None))["TRAINING_CHECKPOINT_URI"] == DEFAULT_CHECKPOINT_URI


@pytest.mark.parametrize(
    ("cloud", "uri"),
    [
        ("aws", "gs://acme-mlp-gcp-dev-checkpoints/run"),
        ("aws", "https://acmemlpazuredevdata.blob.core.windows.net/checkpoints/run"),
        ("gcp", "s3://acme-mlp-dev-checkpoints/run"),
        ("gcp", "az://checkpoints@acmemlpazuredevdata.blob.core.windows.net/run"),
        ("azure", "gs://acme-mlp-gcp-dev-checkpoints/run"),
        ("azure", "s3a://acme-mlp-dev-checkpoints/run"),
        ("azure", "https://example.com/checkpoints/run"),
        ("gcp", "file:///mnt/checkpoints"),
    ],
)
def test_another_clouds_checkpoint_uri_is_refused(cloud: str, uri: str) -> None:
    with pytest.raises(ConfigError) as info:
        launch.LaunchConfig(cloud=cloud, checkpoint_uri=uri)
    assert info.value.field == "checkpoint_uri"
    assert CHECKPOINT_BUCKETS[cloud] in str(info.value)


@pytest.mark.parametrize(
    ("cloud", "data", "checkpoints"),
    [
        ("gcp", "s3://acme-mlp-dev-raw/reviews.csv", "gs://acme-mlp-gcp-dev-checkpoints/run"),
        ("aws", "az://raw@acmemlpazuredevdata.blob.core.windows.net/reviews.csv", DEFAULT_CHECKPOINT_URI),
    ],
)
def test_another_clouds_data_uri_is_refused(cloud: str, data: str, checkpoints: str) -> None:
    with pytest.raises(ConfigError) as info:
        launch.LaunchConfig(cloud=cloud, checkpoint_uri=checkpoints, data_uri=data)
    assert info.value.field == "data_uri" and "--data" in str(info.value)


@pytest.mark.parametrize(
    ("cloud", "checkpoints", "data"),
    [
        ("aws", "s3://acme-mlp-dev-checkpoints/run", "s3a://acme-mlp-dev-raw/reviews.csv"),
        ("gcp", "gs://acme-mlp-gcp-dev-checkpoints/run", "gcs://acme-mlp-gcp-dev-raw/reviews.csv"),
        ("azure", "abfs://checkpoints@acmemlpazuredevdata.dfs.core.windows.net/run", "/data/reviews.csv"),
        ("gcp", "gs://acme-mlp-gcp-dev-checkpoints/run", "https://example.com/public/reviews.csv"),
    ],
)
def test_the_clouds_own_uris_are_rendered(cloud: str, checkpoints: str, data: str) -> None:
    env = _env(launch.LaunchConfig(cloud=cloud, checkpoint_uri=checkpoints, data_uri=data))
    assert (env["TRAINING_CHECKPOINT_URI"], env["TRAINING_DATA_URI"]) == (checkpoints, data)


def test_an_azure_stack_output_is_rewritten_to_the_uri_adlfs_reads() -> None:
    """The stack exports https://<account>.blob.core.windows.net/<container>: fsspec would fetch that as a web page.
    The Job gets az://<container>@<account>...: adlfs takes the account from it, so the pod's identity needs no
    AZURE_STORAGE_ACCOUNT_NAME (no variable the Job can set)."""
    stack_output = "https://acmemlpazuredevdata.blob.core.windows.net"
    cfg = launch.LaunchConfig(
        cloud="azure",
        checkpoint_uri=f"{stack_output}/checkpoints/sentiment-train",
        data_uri=f"{stack_output}/raw/reviews.csv",
    )
    env = _env(cfg)
    uri = "az://checkpoints@acmemlpazuredevdata.blob.core.windows.net/sentiment-train"
    assert env["TRAINING_CHECKPOINT_URI"] == cfg.checkpoint_uri == uri
    assert env["TRAINING_DATA_URI"] == "az://raw@acmemlpazuredevdata.blob.core.windows.net/reviews.csv"
    adlfs = fsspec.get_filesystem_class("az")
    assert adlfs._get_kwargs_from_urls(uri) == {"account_name": "acmemlpazuredevdata"}
    assert adlfs._strip_protocol(uri) == "checkpoints/sentiment-train"


def test_an_azure_uri_without_its_storage_account_is_refused_unless_a_connection_string_names_it() -> None:
    with pytest.raises(ConfigError, match=r"names no storage account.*<container>@<account>\.blob"):
        launch.LaunchConfig(cloud="azure", checkpoint_uri="az://checkpoints/run")
    with_key = {"AZURE_STORAGE_CONNECTION_STRING": "AccountName=acct;AccountKey=k"}
    assert launch.LaunchConfig(cloud="azure", checkpoint_uri="az://checkpoints/run", env=with_key)


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_the_bucket_named_in_the_errors_is_the_one_infra_creates(cloud: str) -> None:
    naming = pytest.importorskip("infra.naming", reason="infra needs the Pulumi SDK")
    cfg = types.SimpleNamespace(org="acme", stack="dev")  # all that the names are made of
    created = {  # infra/<cloud>/storage.py: each stack's `uris`, whose "checkpoints" is checkpoint_bucket_uri
        "aws": f"s3://{naming.global_name(cfg, 'checkpoints')}",
        "gcp": f"gs://{naming.global_name(cfg, 'checkpoints')}",
        "azure": f"https://{naming.compact_name(cfg, 'data')}.blob.core.windows.net/checkpoints",
    }[cloud]
    assert CHECKPOINT_BUCKETS[cloud].replace("<org>", "acme").replace("<stack>", "dev") == created
    assert cloud != "aws" or DEFAULT_CHECKPOINT_URI.startswith(f"{created}/")


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("checkpoint.uri=s3://acme-mlp-dev-checkpoints/run", "checkpoint_uri"),
        ("data.source=s3://acme-mlp-dev-raw/reviews.csv", "data_uri"),
    ],
)
def test_storage_given_as_an_override_is_judged_like_the_flags(override: str, field: str) -> None:
    """`launch ... checkpoint.uri=s3://...` on gcp reached the pod, which has only gcp's identity."""
    with pytest.raises(ConfigError) as info:
        launch.LaunchConfig(
            cloud="gcp", checkpoint_uri="gs://acme-mlp-gcp-dev-checkpoints/run", overrides=(override,)
        )
    assert info.value.field == field
