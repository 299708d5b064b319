#!/usr/bin/env bash
# The deploy step of a promotion (`python -m promotion promote --deploy-command`), also run with
# the previous image when a deploy or its smoke check fails (the rollback).
#
# In:  PROMOTION_IMAGE (<registry>/<repo>@sha256:...), PROMOTION_STACK, PROMOTION_ENVIRONMENT;
#      TRAINING_IMAGE (optional, by digest). The Pulumi CLI is logged in to the state backend.
# Out: the stack runs the image; Pulumi.<stack>.yaml holds it (the pull request carries it back).
set -euo pipefail
: "${PROMOTION_IMAGE:?set by python -m promotion}" "${PROMOTION_STACK:?set by python -m promotion}"

case "$PROMOTION_IMAGE" in
  *@sha256:*) ;;
  *) echo "deploy.sh: $PROMOTION_IMAGE is not pinned by digest" >&2; exit 2 ;;
esac

pulumi stack select "$PROMOTION_STACK"
pulumi config set --path serving.image "$PROMOTION_IMAGE"
if [[ -n "${TRAINING_IMAGE:-}" ]]; then
  pulumi config set trainingImage "$TRAINING_IMAGE"
fi
# The policy pack judges the real plan; a mandatory violation stops the update.
pulumi up --yes --stack "$PROMOTION_STACK" --policy-pack policies \
  --message "promote ${PROMOTION_ENVIRONMENT:-?}: $PROMOTION_IMAGE (run ${GITHUB_RUN_ID:-local})"
