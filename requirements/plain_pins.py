"""Give every `name[extras]==version` stanza of a hashed lock a plain `name==version` twin.

pip in hash-checking mode needs each requirement it meets pinned with `==`: a package required
both with extras (`pandas[parquet]`, by evidently) and without (`pandas`, by formulaic) must
appear in both forms, with the same hashes. `make lock` runs this after `uv pip compile`.

    python requirements/plain_pins.py requirements/lock.txt
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\[[^\]]*\](==.*)$")


def add_plain_pins(text: str) -> str:
    lines = text.splitlines()
    names = {re.split(r"[\[=]", line, maxsplit=1)[0].lower() for line in lines if line and line[0].isalnum()}
    plain = {n for n in names if any(line.lower().startswith(f"{n}==") for line in lines)}
    out: list[str] = []
    i = 0
    while i < len(lines):
        out.append(lines[i])
        match = PIN.match(lines[i])
        if match and match[1].lower() not in plain:
            stanza = [f"{match[1]}{match[2]}"]
            j = i + 1
            while j < len(lines) and lines[j].startswith("    --hash="):
                stanza.append(lines[j])
                j += 1
            stanza[-1] = stanza[-1].rstrip(" \\")
            out.extend(lines[i + 1 : j])
            out.append("    # the same release without extras (pip's hash-checking mode needs both forms)")
            out.extend(stanza)
            plain.add(match[1].lower())
            i = j
            continue
        i += 1
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        path = Path(arg)
        path.write_text(add_plain_pins(path.read_text()))
