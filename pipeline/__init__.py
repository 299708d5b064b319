"""Retraining pipeline: one DAG (pipeline/dag.py), run locally (``python -m pipeline run``) or on Argo Workflows.

python -m pipeline run --dry-run                  # the plan: steps, commands, conditions
python -m pipeline run                            # after `make demo`: its drift reference and records
python -m pipeline run --force                    # retrain whatever the conditions say
python -m pipeline render --training-image REG/training@sha256:... --env dev --out reports/pipeline
"""
