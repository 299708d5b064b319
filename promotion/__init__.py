"""Promotion gates with an audit trail: `python -m promotion evaluate|promote|rollback|history`.

See promotion/README.md. Gates are pure functions (gates.py) over evidence files
(evidence.py) with thresholds from one typed config (config.py, gates.toml); every
decision becomes a record (record.py, record.schema.json) in the model store
(store.py), doubling as the model card (card.py); promoted versions are registered
in MLflow under one alias per environment (registry.py).
"""
