#!/usr/bin/env bash
# The post-deploy smoke check of a promotion (`python -m promotion promote --smoke-command`):
# the live Triton serves the promoted image, is ready, answers, and holds the environment's load.
#
# In:  PROMOTION_IMAGE, PROMOTION_STACK, PROMOTION_ENVIRONMENT, PROMOTION_LOADTEST_OUT (where the
#      load test of the live endpoint goes: it judges the next environment).
set -euo pipefail
: "${PROMOTION_IMAGE:?}" "${PROMOTION_STACK:?}" "${PROMOTION_ENVIRONMENT:?}"

pulumi stack select "$PROMOTION_STACK"
export KUBECONFIG="$RUNNER_TEMP/kubeconfig"
pulumi stack output kubeconfig --show-secrets > "$KUBECONFIG"
read -r ns svc port < <(pulumi stack output serving_endpoint --json | python3 -c '
import json, sys, urllib.parse
url = urllib.parse.urlparse(json.load(sys.stdin)["http"])
name, namespace = url.hostname.split(".")[:2]
print(namespace, name, url.port)')

# The rollout finished and the serving deployment runs exactly the promoted digest.
kubectl -n "$ns" rollout status "deployment/$svc" --timeout=15m
image=$(kubectl -n "$ns" get "deployment/$svc" -o jsonpath='{.spec.template.spec.containers[0].image}')
if [[ "$image" != "$PROMOTION_IMAGE" ]]; then
  echo "smoke.sh: the deployment runs '$image', not $PROMOTION_IMAGE" >&2
  exit 1
fi

kubectl -n "$ns" port-forward "svc/$svc" "18000:$port" > "$RUNNER_TEMP/port-forward.log" 2>&1 &
forward=$!
trap 'kill "$forward"' EXIT
for _ in $(seq 60); do
  curl -fsS http://127.0.0.1:18000/v2/health/ready && break
  sleep 5
done
python -m serving check --url 127.0.0.1:18000
if [[ -n "${PROMOTION_LOADTEST_OUT:-}" ]]; then
  python -m serving loadtest --url 127.0.0.1:18000 --concurrency 1,8 --requests 200 --out "$PROMOTION_LOADTEST_OUT"
  # Which live environment this load test measured (promotion's loadtest-source gate reads it).
  python3 -c 'import json, sys; p = sys.argv[1]; d = json.load(open(p)); d["environment"] = sys.argv[2]; json.dump(d, open(p, "w"), indent=2)' \
    "$PROMOTION_LOADTEST_OUT" "$PROMOTION_ENVIRONMENT"
fi
