#!/usr/bin/env bash
# WebSocket smoke test with a client nobody on the team wrote: wscat (npm),
# against the local adapter built from ./local/cmd/herald on a free port.
# It creates a durable queue and publishes an event with curl, then sends
# docs/websocket.md's open and demand frames with wscat and expects the
# connected frame, the event (with a delivery tag) and a settled answer to
# an ack; a ping frame sent with the token in the access_token query
# parameter (the browser way) must be answered by a pong; a connection
# without a token must be refused with 401.
set -euo pipefail
cd "$(dirname "$0")/.."

WSCAT_VERSION=6.1.0
work=$(mktemp -d)
token="wscat-ci-token"

echo "== installing wscat $WSCAT_VERSION"
npm install --prefix "$work/npm" --no-audit --no-fund --loglevel=error "wscat@$WSCAT_VERSION" >/dev/null
wscat_bin="$work/npm/node_modules/.bin/wscat"
"$wscat_bin" --version
# wscat exits as soon as its stdin ends, even with -x: keep stdin open a
# little longer than its -w wait.
wscat() {
  local wait=$1
  shift
  sleep $((wait + 3)) | "$wscat_bin" -w "$wait" "$@"
}

# shellcheck source=.ci/herald.sh
. .ci/herald.sh
H="http://$addr"
WS="ws://$addr/api/v1beta/events/websocket"
auth="Authorization: Bearer $token"

echo "== durable queue and one event (curl)"
curl -sf -X POST "$H/api/v1beta/queues/durable" -H "$auth" \
  -d '{"queue_id": "wscat-q", "filter_groups": [{"event_type": "myapp.user.created"}]}' | tee "$work/queue.json"
echo
curl -sf -X POST "$H/api/v1beta/events" -H "$auth" -H 'Content-Type: application/json' -d '{
  "event": {"event_type": "myapp.user.created", "message": {"user_id": "123"},
            "occurred_at": "2024-10-16T14:30:00Z", "resource": {"resource_id": "/users/123"}}}' | tee "$work/publish.json"
echo
grep -q '"success":true' "$work/publish.json" || fail "publish did not succeed"

echo "== wscat: open, demand, ack"
# wscat sends the -x frames one after another once connected and prints
# what arrives for -w seconds. The ack may reach Herald before the event
# went out (then its tag is skipped): either way a settled frame answers.
wscat 3 -c "$WS" -H "$auth" -s herald.v1 \
  -x '{"type": "open", "id": "o1", "stream": "durable", "queue_id": "wscat-q"}' \
  -x '{"type": "demand", "n": 10}' \
  -x '{"type": "ack", "id": "a1", "delivery_tags": [1]}' | tee "$work/frames.txt" || fail "wscat failed"
grep -q '"type":"connected","id":"o1","stream":"durable","queue_id":"wscat-q"' "$work/frames.txt" || fail "no connected frame"
grep -q '"type":"event","delivery_tag":1,"delivery_count":1,"event":{"event_type":"myapp.user.created"' "$work/frames.txt" || fail "no event frame"
grep -q '"type":"settled","id":"a1"' "$work/frames.txt" || fail "no settled frame"

echo "== wscat: access_token query parameter, ping"
wscat 1 -c "$WS?access_token=$token" -x '{"type": "ping", "id": "p1"}' | tee "$work/pong.txt" || fail "wscat failed"
grep -q '"type":"pong","id":"p1"' "$work/pong.txt" || fail "no pong frame"

echo "== wscat: no token"
if wscat 1 -c "$WS" -x '{"type": "ping"}' >"$work/unauth.txt" 2>&1; then
  cat "$work/unauth.txt"
  fail "a connection without a token was not refused"
fi
cat "$work/unauth.txt"
grep -q "Unexpected server response: 401" "$work/unauth.txt" || fail "a connection without a token is not 401"

echo "wscat: 4 passed, 0 failed"
