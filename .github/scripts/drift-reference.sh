#!/usr/bin/env bash
# The `--drift-reference` of a promotion or rollback: where STACK's drift CronJob reads the served model's
# reference (its models bucket, reference/: python -m infra.drift_reference), so the workflow writes exactly what
# the drift job reads. A stack never brought up has no outputs yet: nothing printed, exit 0, and the caller
# promotes without the flag (the reference is then written after the first `up`: `python -m promotion reference`).
#
# In:  $1 the stack; the Pulumi CLI logged in to the state backend.
# Out: the location on stdout (`s3://<models>/reference/`); exit 2 when the output names no models bucket.
set -euo pipefail
stack="${1:?usage: drift-reference.sh STACK}"

if ! uris=$(pulumi stack output bucket_uris --json --stack "$stack"); then
  echo "drift-reference.sh: stack $stack has no bucket_uris output (never brought up?)" >&2
  exit 0
fi
printf '%s\n' "$uris" | python -m infra.drift_reference
