#!/usr/bin/env bash
# Bring a stack config the pipeline changed (the promoted image digest) back to the repository
# as a pull request, so Pulumi.<stack>.yaml in git stays what the stack runs.
#
# In: STACK (the stack name), GH_TOKEN (contents: write, pull-requests: write), the changed file
#     in the working tree.
set -euo pipefail
: "${STACK:?}" "${GH_TOKEN:?}"
file="Pulumi.$STACK.yaml"
if git diff --quiet -- "$file"; then
  echo "stack-config-pr.sh: $file unchanged: no pull request"
  exit 0
fi
branch="promotion/$STACK-${GITHUB_RUN_ID:-manual}"
git switch --create "$branch"
git add -- "$file"
git -c user.name="github-actions[bot]" -c user.email="41898282+github-actions[bot]@users.noreply.github.com" \
  commit --quiet --message "$STACK: serving image from promotion run ${GITHUB_RUN_ID:-manual}"
git push --quiet origin "$branch"
gh pr create --base "${GITHUB_REF_NAME:-main}" --head "$branch" \
  --title "$STACK: promoted serving image" \
  --body "The promotion run ${GITHUB_SERVER_URL:-}/${GITHUB_REPOSITORY:-}/actions/runs/${GITHUB_RUN_ID:-} deployed this image to $STACK. Merge to keep the repository the truth."
