"""Point a stack's `serving.image` at a promoted (or rolled-back-to) image digest.

The same change `pulumi config set --path serving.image REF` makes, done on the committed
`Pulumi.<stack>.yaml` text so comments and layout survive and the change is reviewable in a
pull request (the GitOps way for a team that applies stacks from the repository).
"""

from __future__ import annotations

import re
from pathlib import Path

from promotion.errors import PromotionError

_BLOCK = re.compile(r"^(?P<indent>[ ]+)(?P<project>[\w.-]+):serving:[ ]*$")


def set_serving_image(text: str, image: str) -> str:
    """Return `text` with `<project>:serving: {image: ...}` set to `image` (block style only)."""
    if not re.fullmatch(r"[\w./:-]+@sha256:[0-9a-f]{64}|sha256:[0-9a-f]{64}", image):
        raise PromotionError(f"{image!r} is not an image pinned by digest (<repo>@sha256:<64 hex>)")
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        match = _BLOCK.match(line.rstrip("\n"))
        if not match:
            continue
        outer = len(match["indent"])
        for j in range(i + 1, len(lines)):
            body = lines[j].rstrip("\n")
            if body.strip() and len(body) - len(body.lstrip(" ")) <= outer:
                break  # left the serving block without finding `image:`
            found = re.match(r"^(?P<lead>[ ]+image:[ ]*)(?P<value>[^#\n]*?)(?P<tail>[ ]*(#.*)?)$", body)
            if found:
                lines[j] = f"{found['lead']}{image}{found['tail']}" + (
                    "\n" if lines[j].endswith("\n") else ""
                )
                return "".join(lines)
        raise PromotionError(
            "the stack config's serving block has no `image:` key: add `image: <tag>` under it"
        )
    raise PromotionError(
        "no `<project>:serving:` block in the stack config (see infra/README.md for its keys)"
    )


def update_stack_config(path: Path, image: str) -> bool:
    """Rewrite the file in place; returns whether it changed."""
    before = path.read_text()
    after = set_serving_image(before, image)
    if after != before:
        path.write_text(after)
    return after != before
