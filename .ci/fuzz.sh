#!/usr/bin/env bash
# Runs every fuzz target of the parsers that take outside input for a few
# seconds each (FUZZTIME, default 5s). A crasher Go finds is written under
# the package's testdata/fuzz/<Target>/ and fails this step: commit that
# file with the fix, and `go test` replays it as a regression case from
# then on.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-5s}"
targets=(
  ./internal/strictjson:FuzzUnmarshal
  ./internal/strictjson:FuzzCheckObject
  ./internal/strictjson:FuzzScanObject
  ./functions/router:FuzzRESTBodies
  ./functions/publish:FuzzParseBatch
  ./functions/httpx:FuzzBearerToken
  ./auth:FuzzParseBearer
  ./functions/wsframe:FuzzDecode
  ./filter:FuzzParse
  ./delivery:FuzzReconnectToken
  ./delivery:FuzzQueueID
  ./delivery:FuzzEventValidate
  ./delivery:FuzzCheckText
  ./delivery:FuzzParseStored
  ./cloudevent:FuzzParseSequence
  ./cloudevent:FuzzEncodeMatchesSDK
  ./internal/structjson:FuzzDecodeMatchesProtojson
  ./internal/structjson:FuzzWireMatchesDecode
  ./internal/structjson:FuzzEncodeMatchesProtojson
  ./internal/structjson:FuzzFromWireMatchesUnmarshal
  ./leasestore:FuzzRecordCodecs
  ./leasestore:FuzzEventBatchRoundTrip
  ./pubsubx/mem:FuzzOpenURL
  ./pubsubx/rabbit:FuzzOpenURL
  ./pubsubx/nats:FuzzOpenURL
  ./pubsubx/nats:FuzzParseAck
)
for t in "${targets[@]}"; do
  pkg="${t%%:*}" name="${t##*:}"
  echo "-- fuzz $pkg $name ($fuzztime)"
  out=$(mktemp)
  if ! go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -parallel 2 2>&1 | tee "$out"; then
    # On a loaded machine Go's fuzzing coordinator can miss its own
    # deadline ("context deadline exceeded") without finding anything; a
    # real crasher always says where it wrote the failing input. Only the
    # former is run again, once.
    if grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written to' "$out"; then
      echo "-- fuzz $pkg $name: the coordinator timed out without a crasher; once more"
      go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -parallel 2
    else
      rm -f "$out"
      exit 1
    fi
  fi
  rm -f "$out"
done
