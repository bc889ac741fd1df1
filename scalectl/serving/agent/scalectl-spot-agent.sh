#!/bin/sh
# scalectl-spot-agent: tell scalectl when this machine is about to be reclaimed.
# Env: SCALECTL_URL (https://scalectl.example.com/v1/webhooks/interruption), SCALECTL_WEBHOOK_SECRET,
#      SCALECTL_PROVIDER (provider name in tiers.yaml), SCALECTL_KEY (this instance's key), CLOUD (aws|gcp);
#      optional: SCALECTL_POLL_SECONDS (5), SCALECTL_IMDS_URL / SCALECTL_GCE_METADATA_URL (the clouds' own).
# Needs curl and openssl. Watches the metadata endpoint, posts one signed notice, exits 0.
# Printed by `scalectl spot-agent`; the test suite runs this very file against local metadata servers.
set -eu
: "${SCALECTL_POLL_SECONDS:=5}"

notify() {  # $1 = action, $2 = deadline (ISO 8601 or epoch seconds; may be empty)
  ts=$(date +%s)
  body="{\"provider\":\"$SCALECTL_PROVIDER\",\"key\":\"$SCALECTL_KEY\",\"instance_id\":\"$INSTANCE_ID\",\"action\":\"$1\",\"deadline\":\"$2\"}"
  [ -n "$2" ] || body="{\"provider\":\"$SCALECTL_PROVIDER\",\"key\":\"$SCALECTL_KEY\",\"instance_id\":\"$INSTANCE_ID\",\"action\":\"$1\"}"
  sig=$(printf '%s.%s' "$ts" "$body" | openssl dgst -sha256 -hmac "$SCALECTL_WEBHOOK_SECRET" -r | cut -d' ' -f1)
  curl -fsS --max-time 10 --retry 3 -X POST "$SCALECTL_URL" \
    -H 'Content-Type: application/json' -H "X-Scalectl-Timestamp: $ts" -H "X-Scalectl-Signature: sha256=$sig" \
    --data-binary "$body"
}

case "${CLOUD:-}" in
aws)  # IMDSv2: a session token first; instance-action is 404 until EC2 schedules the interruption
  imds=${SCALECTL_IMDS_URL:-http://169.254.169.254/latest}
  tok() { curl -fsS -X PUT "$imds/api/token" -H 'X-aws-ec2-metadata-token-ttl-seconds: 300'; }
  INSTANCE_ID=$(curl -fsS -H "X-aws-ec2-metadata-token: $(tok)" "$imds/meta-data/instance-id")
  while :; do
    doc=$(curl -fsS -H "X-aws-ec2-metadata-token: $(tok)" "$imds/meta-data/spot/instance-action" || true)
    if [ -n "$doc" ]; then  # {"action": "terminate", "time": "2026-03-01T12:02:00Z"}
      action=$(printf '%s' "$doc" | sed -n 's/.*"action" *: *"\([a-z]*\)".*/\1/p')
      when=$(printf '%s' "$doc" | sed -n 's/.*"time" *: *"\([^"]*\)".*/\1/p')
      notify "${action:-terminate}" "$when" && exit 0
    fi
    sleep "$SCALECTL_POLL_SECONDS"
  done ;;
gcp)  # blocks until the value changes; TRUE = preempted, about 30 s before the machine stops
  md=${SCALECTL_GCE_METADATA_URL:-http://metadata.google.internal/computeMetadata/v1/instance}
  INSTANCE_ID=$(curl -fsS -H 'Metadata-Flavor: Google' "$md/id")
  until [ "$(curl -fsS -H 'Metadata-Flavor: Google' "$md/preempted?wait_for_change=true" || true)" = TRUE ]; do
    sleep 1  # the request itself waits for a change; this only spaces retries after an error
  done
  notify terminate "$(( $(date +%s) + 30 ))" ;;
*)  echo "scalectl-spot-agent: CLOUD must be aws or gcp, not '${CLOUD:-}'" >&2; exit 2 ;;
esac
