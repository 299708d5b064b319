"""Point a stack's `serving.image` at a promoted (or rolled-back-to) image digest.

The same change `pulumi config set --path serving.image REF` makes, done on the committed
`Pulumi.<stack>.yaml` with ruamel.yaml's round-trip mode, so comments, key order and layout
survive and the change is one reviewable line in the pull request the pipeline opens (the
repository stays the truth for what each stack runs).
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from promotion.errors import PromotionError

_PINNED = re.compile(r"[\w./:\[\]-]+@sha256:[0-9a-f]{64}|sha256:[0-9a-f]{64}")


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML()  # round-trip: comments and layout are kept
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long line the author wrote on one
    return yaml


def set_serving_image(text: str, image: str) -> str:
    """Return `text` with `<project>:serving: {image: ...}` set to `image`."""
    if not _PINNED.fullmatch(image):
        raise PromotionError(f"{image!r} is not an image pinned by digest (<repo>@sha256:<64 hex>)")
    from ruamel.yaml.error import YAMLError

    yaml = _yaml()
    try:
        doc = yaml.load(text)
    except YAMLError as exc:
        raise PromotionError(f"the stack config is not valid YAML: {exc}") from None
    config = (doc or {}).get("config") or {}
    blocks = [key for key in config if str(key).endswith(":serving")]
    if not blocks:
        raise PromotionError(
            "no `<project>:serving:` block in the stack config (see infra/README.md for its keys)"
        )
    serving = config[blocks[0]]
    if not hasattr(serving, "get") or "image" not in serving:
        raise PromotionError(
            "the stack config's serving block has no `image:` key: add `image: <tag>` under it"
        )
    if serving["image"] == image:
        return text
    serving["image"] = image
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


def check_stack_config(path: Path, stack: str) -> None:
    """Refuse, before anything is promoted or rolled back, a file the digest could not go into afterwards, or
    one of another stack: dev's image written into Pulumi.prod.yaml would reach prod through the pull request
    without staging or an approval."""
    expected = f"Pulumi.{stack}.yaml"
    if path.name != expected:
        raise PromotionError(
            f"--stack-config {path}: this environment deploys stack {stack!r}, whose config is {expected}"
        )
    try:
        text = path.read_text()
    except OSError as exc:
        raise PromotionError(
            f"--stack-config {path} cannot be read ({exc.strerror}): nothing was changed"
        ) from None
    try:
        set_serving_image(text, "sha256:" + "0" * 64)
    except PromotionError as exc:
        raise PromotionError(f"--stack-config {path}: {exc}; nothing was changed") from None


def update_stack_config(path: Path, image: str) -> bool:
    """Rewrite the file in place; returns whether it changed."""
    before = path.read_text()
    after = set_serving_image(before, image)
    if after != before:
        path.write_text(after)
    return after != before
