#!/usr/bin/env bash
# gRPC smoke test with a client nobody on the team wrote: grpcurl, knowing
# nothing but what server reflection tells it, against `go run
# ./local/cmd/herald` on a free port. It lists the services, checks health,
# runs seed 002's PublishEvent and BatchPublishEvents examples, its
# CreateDurableQueue (greedy resource filter), ConsumeDurableEventsWithAcks
# (queue_id, then an ack on the same stream) and DeleteDurableQueue
# examples; a call without a token must be Unauthenticated.
set -euo pipefail
cd "$(dirname "$0")/.."

GRPCURL_VERSION=v1.9.4
work=$(mktemp -d)
token="grpcurl-ci-token"

grpcurl=$(command -v grpcurl || true)
if [ -z "$grpcurl" ]; then
  echo "== installing grpcurl $GRPCURL_VERSION"
  GOBIN="$work/bin" go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION"
  grpcurl="$work/bin/grpcurl"
fi

# shellcheck source=.ci/herald.sh
. .ci/herald.sh
publisher=nvidia.omniverse.notifications.publisher.v1beta.EventPublishingService

echo "== grpcurl list"
services=$("$grpcurl" -plaintext "$addr" list)
echo "$services"
grep -qx "$publisher" <<<"$services" || fail "reflection does not list $publisher"
grep -qx "grpc.health.v1.Health" <<<"$services" || fail "reflection does not list grpc.health.v1.Health"

echo "== grpcurl describe"
"$grpcurl" -plaintext "$addr" describe "$publisher" | tee "$work/describe.txt"
grep -q "rpc PublishEvent" "$work/describe.txt" || fail "describe lacks PublishEvent"

echo "== health"
"$grpcurl" -plaintext "$addr" grpc.health.v1.Health/Check | tee "$work/health.json"
grep -q '"status": "SERVING"' "$work/health.json" || fail "health is not SERVING"

echo "== PublishEvent (seed 002 example)"
"$grpcurl" -plaintext -H "authorization: Bearer $token" -d '{
  "event": {
    "event_type": "myapp.user.created",
    "message": {"user_id": "123", "username": "john_doe"},
    "occurred_at": "2024-10-16T14:30:00Z",
    "resource": {"resource_id": "/users/123"}
  }
}' "$addr" "$publisher/PublishEvent" | tee "$work/publish.json"
grep -q '"success": true' "$work/publish.json" || fail "PublishEvent did not succeed"

echo "== BatchPublishEvents"
"$grpcurl" -plaintext -H "authorization: Bearer $token" -d '{"events": [
  {"event_type": "myapp.file.uploaded", "message": {"file": "doc1.pdf"}},
  {"event_type": "", "message": {"file": "doc2.pdf"}}
]}' "$addr" "$publisher/BatchPublishEvents" | tee "$work/batch.json"
[ "$(grep -c '"success": true' "$work/batch.json")" = 1 ] || fail "the batch's first event should succeed"
grep -q '"failureReason": "event_type is required"' "$work/batch.json" || fail "the batch's second event should fail alone"

consumer=nvidia.omniverse.notifications.consumer.v1beta.EventConsumerService
auth="authorization: Bearer $token"

echo "== CreateDurableQueue (seed 002 example: greedy resource filter)"
"$grpcurl" -plaintext -H "$auth" -d '{"queue_id": "grpcurl-uploads", "filter_groups": [
  {"event_type": "myapp.file.uploaded",
   "filters": [{"filter_type": "FILTER_TYPE_STARTS_WITH_GREEDY", "resource_id": "/uploads/"}]}]}' \
  "$addr" "$consumer/CreateDurableQueue" | tee "$work/create.json"
grep -q '"queueId": "grpcurl-uploads"' "$work/create.json" || fail "CreateDurableQueue did not answer the queue id"
"$grpcurl" -plaintext -H "$auth" -d '{"events": [
  {"event_type": "myapp.file.uploaded", "message": {"n": 1}, "resource": {"resource_id": "/uploads/a/b.pdf"}},
  {"event_type": "myapp.file.uploaded", "message": {"n": 2}, "resource": {"resource_id": "/other/c.pdf"}}
]}' "$addr" "$publisher/BatchPublishEvents" >/dev/null

echo "== ConsumeDurableEventsWithAcks (seed 002 example: queue_id first, then acks)"
# Requests from stdin (-d @): the queue id, then, once the event has
# arrived, an ack of tag 1; closing stdin ends the stream OK.
(echo '{"queue_id": "grpcurl-uploads"}'; sleep 2; echo '{"ack_delivery_tags": [1]}'; sleep 1) |
  "$grpcurl" -plaintext -H "$auth" -d @ "$addr" "$consumer/ConsumeDurableEventsWithAcks" | tee "$work/consume.json"
grep -q '"deliveryTag": "1"' "$work/consume.json" || fail "no event with delivery tag 1"
grep -q '"n": 1' "$work/consume.json" || fail "the /uploads/ event was not delivered"
if grep -q '"n": 2' "$work/consume.json"; then fail "the greedy filter let /other/ through"; fi

echo "== the acknowledged event is not delivered again"
(echo '{"queue_id": "grpcurl-uploads"}'; sleep 2) |
  "$grpcurl" -plaintext -H "$auth" -d @ "$addr" "$consumer/ConsumeDurableEventsWithAcks" | tee "$work/again.json"
if grep -q '"events"' "$work/again.json"; then fail "an acknowledged event came back"; fi

echo "== DeleteDurableQueue, then NotFound"
"$grpcurl" -plaintext -H "$auth" -d '{"queue_id": "grpcurl-uploads"}' "$addr" "$consumer/DeleteDurableQueue"
if echo '{"queue_id": "grpcurl-uploads"}' | "$grpcurl" -plaintext -H "$auth" -d @ "$addr" "$consumer/ConsumeDurableEventsWithAcks" >"$work/gone.txt" 2>&1; then
  cat "$work/gone.txt"
  fail "consuming a deleted queue succeeded"
fi
cat "$work/gone.txt"
grep -q "Code: NotFound" "$work/gone.txt" || fail "consuming a deleted queue is not NotFound"

echo "== no token"
if "$grpcurl" -plaintext -d '{"event": {"event_type": "a"}}' "$addr" "$publisher/PublishEvent" >"$work/unauth.txt" 2>&1; then
  fail "a call without a token succeeded"
fi
cat "$work/unauth.txt"
grep -q "Code: Unauthenticated" "$work/unauth.txt" || fail "a call without a token is not Unauthenticated"

echo "grpcurl: all passed"
