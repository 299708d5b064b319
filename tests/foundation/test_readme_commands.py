"""The commands the READMEs show exist: users copy them literally.

Every `python -m <project package> ...` in a README (fenced blocks and inline code, backslash continuations
joined) and in the Makefile is checked against the real argparse parser of that module: each subcommand
(nested ones too, `pipeline step promote`) and each long flag, exactly as spelt (argparse would accept an
abbreviation today and refuse it once another flag shares the prefix). Every `make <target>` a README names
must be a target of the Makefile, and an option quoted alone in prose (`--no-checkov`) must exist in some
project CLI (or be listed in EXTERNAL_FLAGS with its tool). A README that drifted from its CLI fails here,
naming file, line and what the parser has.

The parsers are read without running any command: one subprocess runs each module as `python -m` does
(`runpy`, so `__main__` wiring and `register()` hooks count) with `ArgumentParser.parse_known_args` replaced
by a capture that stops the module before it acts on its arguments; a module that fails to import is reported.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from rendered_commands import PACKAGES, ROOT, capture_parser

SKIP_DIRS = frozenset(("node_modules", "build", "reports", "runs"))
# Tokens that end a command in a snippet; `|` followed by a flag is the READMEs' "either" notation instead.
ENDERS = frozenset(("|", "||", "&&", ";", ">", ">>", "2>", "2>&1", "<"))
FLAG = re.compile(r"--[A-Za-z0-9][\w-]*")
TARGET = re.compile(r"[a-z][a-z0-9-]*[a-z0-9]")
# Flags the READMEs quote alone (`--timestamp`) that belong to other tools, not to a project CLI.
EXTERNAL_FLAGS = {
    "--timestamp": "buildah bud",
    "--tls-verify": "buildah",
    "--bundle-from-oci": "gh attestation verify",
    "--no-deps": "pip install",
    "--target": "pip install",
    "--require-hashes": "pip install",
    "--metrics-config": "tritonserver",
    "--exit-on-error": "tritonserver",
    "--exit-timeout-secs": "tritonserver",
    "--ort-spinning": "serving/README.md says it is deliberately not on the CLI",
    "--cap-drop": "buildah run",
}


@dataclass(frozen=True)
class Command:
    source: str  # README path relative to the repository, with the line the snippet starts on
    words: tuple[str, ...]  # from the module on: ("training", "train", "--preset", "demo")

    def __str__(self) -> str:
        return f"{self.source}: python -m {' '.join(self.words)}"


# --- snippets -----------------------------------------------------------------------------------------


def readmes() -> list[Path]:
    found = []
    for path in sorted(ROOT.rglob("*.md")):  # READMEs and the notes beside them (serving/PERFORMANCE.md)
        parts = path.relative_to(ROOT).parts[:-1]
        if not any(p.startswith(".") or p in SKIP_DIRS for p in parts):
            found.append(path)
    return found


def snippets(text: str) -> list[tuple[int, str]]:
    """(line number, command text) for each line of a fenced block and each inline code span."""
    out: list[tuple[int, str]] = []
    lines = text.splitlines()
    prose: list[str] = []
    fenced, pending, start = False, "", 0
    for n, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            prose.append("")
            continue
        if not fenced:
            prose.append(line)
            continue
        prose.append("")
        if not pending:
            start = n
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    body = "\n".join(prose)
    for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", body):
        out.append((body.count("\n", 0, m.start()) + 1, m.group(1).replace("\\\n", " ").replace("\n", " ")))
    return out


def tokens(snippet: str) -> list[str]:
    try:
        return shlex.split(snippet, comments=True)
    except ValueError:  # an unbalanced quote in prose: whitespace is good enough for flags and subcommands
        return snippet.split("#")[0].split()


def python_commands(path: Path, text: str) -> list[Command]:
    rel = path.relative_to(ROOT)
    found = []
    for line, snippet in snippets(text):
        words = tokens(snippet)
        for i, word in enumerate(words[:-1]):
            if word != "-m" or words[i + 1].split(".")[0] not in PACKAGES:
                continue
            cmd = [words[i + 1]]
            for j in range(i + 2, len(words)):
                w = words[j]
                if w in ENDERS and not (w == "|" and j + 1 < len(words) and words[j + 1].startswith("-")):
                    break
                if (
                    w == "-m"
                ):  # `python -m training.elastic ... -m training train`: the rest is the inner module's
                    break
                cmd.append(w)
            for module in _alternatives(cmd[0], sep="/", module=True):
                found.append(Command(f"{rel}:{line}", (module, *cmd[1:])))
    return found


def make_targets(text: str) -> list[tuple[int, str]]:
    found = []
    for line, snippet in snippets(text):
        words = tokens(snippet)
        for i, word in enumerate(words):
            if word != "make":
                continue
            for w in words[i + 1 :]:
                if "=" in w or w.startswith("-"):  # make VAR=value, make -j2
                    continue
                if w in ENDERS or not TARGET.fullmatch(w):
                    break
                found.append((line, w))
    return found


def _alternatives(word: str, *, sep: str = "/|", module: bool = False) -> list[str]:
    """`evaluate|promote|rollback`, `drift/evaluate`, `policies.analyze/report`: each one alone."""
    parts = re.split(f"[{re.escape(sep)}]", word)
    if module and len(parts) > 1:
        base = parts[0].rsplit(".", 1)[0]
        return [parts[0], *(f"{base}.{p}" for p in parts[1:])]
    return parts


def _clean(word: str) -> str:
    """`[--check]` -> `--check`, `--out=DIR` -> `--out`."""
    return word.strip("[](){},").split("=", 1)[0]


def _placeholder(word: str) -> bool:
    return word in ("...", "…") or any(c in word for c in "<>$") or (word.isupper() and len(word) > 1)


# --- the parsers ----------------------------------------------------------------------------------------


def _tree(parser: argparse.ArgumentParser) -> dict[str, Any]:
    options: dict[str, bool] = {}  # flag -> takes a value
    subcommands: dict[str, Any] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                subcommands[name] = _tree(sub)
        for flag in action.option_strings:
            options[flag] = action.nargs != 0
    return {"prog": parser.prog, "options": options, "subcommands": subcommands}


def _dump(module: str) -> dict[str, Any]:
    """Run `python -m module` up to its argument parsing and describe the parser it built."""
    found = capture_parser(module)
    return {"error": found} if isinstance(found, str) else _tree(found)


@cache
def parsers(modules: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, __file__, *modules], cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- checking one command against its parser ---------------------------------------------------------


def problems(cmd: Command, tree: dict[str, Any]) -> list[str]:
    if "error" in tree:
        return [f"{cmd}: `python -m {cmd.words[0]}` has no parser here ({tree['error']})"]
    nodes = [tree]  # the parsers the next word is read by (several after `a|b`)
    chosen = not tree["subcommands"]
    errors = []
    words = list(cmd.words[1:])
    i = 0
    while i < len(words):
        word = _clean(words[i])
        i += 1
        if word in ("--", "|") or not word:
            continue
        if FLAG.fullmatch(word):
            takes = [n["options"][word] for n in nodes if word in n["options"]]
            if not takes:
                known = sorted({f for n in nodes for f in n["options"] if f.startswith("--")})
                errors.append(f"{cmd}: no option {word} in `{nodes[0]['prog']}` (it has {', '.join(known)})")
            elif any(takes) and i < len(words) and not words[i].lstrip("[").startswith("-"):
                i += 1  # the option's value
            continue
        if word.startswith("-") or chosen:
            continue  # a short flag, or a positional argument
        if _placeholder(word):
            break  # `python -m training export ...`: which subcommand is not shown
        names = _alternatives(word)
        missing = [n for n in names if not any(n in node["subcommands"] for node in nodes)]
        if missing:
            known = sorted({s for n in nodes for s in n["subcommands"]})
            errors.append(
                f"{cmd}: no subcommand {'/'.join(missing)} in `{nodes[0]['prog']}` (it has {', '.join(known)})"
            )
            break
        nodes = [node["subcommands"][n] for n in names for node in nodes if n in node["subcommands"]]
        chosen = not any(n["subcommands"] for n in nodes)
    return errors


def documented() -> tuple[list[Command], list[tuple[str, str]]]:
    commands: list[Command] = []
    targets: list[tuple[str, str]] = []
    for path in readmes():
        text = path.read_text(encoding="utf-8")
        commands += python_commands(path, text)
        targets += [(f"{path.relative_to(ROOT)}:{n}", t) for n, t in make_targets(text)]
    makefile = ROOT / "Makefile"
    commands += python_commands(makefile, "```\n" + makefile.read_text(encoding="utf-8") + "\n```")
    return commands, targets


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.MULTILINE)}


# --- the tests ------------------------------------------------------------------------------------------


def test_readmes_show_commands_at_all() -> None:
    """The extraction itself: a change that made it find nothing would pass every check below."""
    commands, targets = documented()
    modules = {c.words[0] for c in commands}
    assert {
        "training",
        "serving",
        "promotion",
        "monitoring",
        "pipeline",
        "policies.analyze",
        "infra.plan",
    } <= modules
    assert {"demo", "test", "plan", "policy", "images"} <= {t for _, t in targets}
    multi = [c for c in commands if c.words[:2] == ("monitoring", "budget") and "--subscription" in c.words]
    assert multi, "a backslash-continued command (monitoring/README.md, budget --cloud gcp) was not joined"


def test_readme_python_commands_match_their_parsers() -> None:
    commands, _ = documented()
    trees = parsers(tuple(sorted({c.words[0] for c in commands})))
    errors = [e for c in commands for e in problems(c, trees[c.words[0]])]
    assert not errors, "README commands the CLIs do not accept:\n" + "\n".join(errors)


def test_flags_quoted_alone_exist_in_some_cli() -> None:
    """`--no-checkov`, `--storage-secret`, `--intra-op-threads`: options named in prose, without their command."""
    commands, _ = documented()
    trees = parsers(tuple(sorted({c.words[0] for c in commands})))

    def flags(tree: dict[str, Any]) -> set[str]:
        return set(tree.get("options", ())).union(*(flags(t) for t in tree.get("subcommands", {}).values()))

    known = set().union(*(flags(t) for t in trees.values())) | set(EXTERNAL_FLAGS)
    missing = []
    for path in readmes():
        for line, snippet in snippets(path.read_text(encoding="utf-8")):
            words = [_clean(w) for w in tokens(snippet)]
            if words and words[0].startswith("--"):
                missing += [
                    f"{path.relative_to(ROOT)}:{line}: {w}"
                    for w in words
                    if FLAG.fullmatch(w) and w not in known
                ]
    assert not missing, (
        "options quoted in READMEs that no project CLI has (another tool's? EXTERNAL_FLAGS):\n"
        + ("\n".join(missing))
    )


def test_the_pipeline_dry_run_prints_commands_that_parse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m pipeline run --dry-run` prints each step's command for a user to copy: an empty value (no
    --serving-image given) printed as nothing made `--training-image --serving-image ...`, which its parser refuses."""
    from pipeline.cli import main, parser

    assert main(["run", "--dry-run", "--work", str(tmp_path / "w")]) == 0
    printed = [
        line.strip()
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("    python -m pipeline ")
    ]
    assert len(printed) >= 5, printed
    for line in printed:
        try:
            parser().parse_args(shlex.split(line)[3:])
        except SystemExit:
            pytest.fail(f"the dry run printed a command its own parser refuses: {line}")


def test_the_pipeline_run_echoes_each_command_as_it_runs_it(tmp_path: Path) -> None:
    """`RUN <step>: <command>` lines are what a user re-runs a failed step with: an empty value must survive."""
    from pipeline import dag, runner

    fail = [sys.executable, "-c", "import sys; sys.exit(3)", "", "two words"]
    lines: list[str] = []
    params = dag.Params(work=str(tmp_path / "w"), store=str(tmp_path / "store"))
    runner.run(params, commands={"data-check": fail, "drift-check": fail}, echo=lines.append)
    ran = [line.split(": ", 1)[1] for line in lines if line.startswith("RUN ")]
    assert ran and all(shlex.split(line) == fail for line in ran), lines


def test_readme_make_targets_exist() -> None:
    _, targets = documented()
    have = makefile_targets()
    missing = [f"{where}: make {t}" for where, t in targets if t not in have]
    assert not missing, (
        f"make targets named in READMEs but not in the Makefile ({sorted(have)}):\n" + "\n".join(missing)
    )


def test_a_bogus_flag_or_subcommand_is_caught(tmp_path: Path) -> None:
    """What the drift looks like: one flag or subcommand a parser does not have, in a README-shaped text."""
    text = (
        "```bash\npython -m serving build runs/demo/export models/ \\\n    --precision int8 --bogus-flag 3\n"
        "python -m pipeline step promote --no-such-step-flag x\n```\n"
        "and inline `python -m promotion evaluate|promote|frobnicate --env dev`, `make no-such-target`.\n"
    )
    readme = ROOT / "README.md"  # only for the relative path in the message
    commands = python_commands(readme, text)
    trees = parsers(("pipeline", "promotion", "serving"))
    errors = [e for c in commands for e in problems(c, trees[c.words[0]])]
    said = [e.split(": ")[-1] for e in errors]  # what is wrong, without the command it quotes
    assert len(said) == 3, errors
    assert said[0].startswith("no option --bogus-flag in `python -m serving build`"), errors
    assert said[1].startswith("no option --no-such-step-flag in `python -m pipeline step promote`"), errors
    assert said[2].startswith("no subcommand frobnicate in `python -m promotion`"), errors
    assert ("no-such-target" not in makefile_targets()) and [t for _, t in make_targets(text)] == [
        "no-such-target"
    ]


if __name__ == "__main__":  # the subprocess `parsers` runs: one JSON line, module -> parser tree
    sys.path.insert(0, str(ROOT))
    result = {module: _dump(module) for module in sys.argv[1:]}
    sys.stdout.flush()
    print(json.dumps(result))
