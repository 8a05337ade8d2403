# Sourced by the CI smoke scripts (grpcurl.sh, wscat.sh): builds the local
# adapter, starts it with token $token on a free port and sets $addr, and
# stops it (and removes $work) when the script exits. Expects $work (a
# temporary directory) and $token to be set.
herald_pid=
herald_cleanup() {
  if [ -n "$herald_pid" ]; then kill "$herald_pid" 2>/dev/null || true; wait "$herald_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap herald_cleanup EXIT

# Herald picks a free port (HERALD_ADDR=…:0) and logs it. It is built
# rather than `go run`, so that the process killed at the end is Herald
# itself, not a go command that leaves its child running.
go build -o "$work/herald" ./local/cmd/herald
HERALD_ADDR=127.0.0.1:0 HERALD_DEV_TOKEN="$token" "$work/herald" >"$work/herald.log" 2>&1 &
herald_pid=$!
addr=
for _ in $(seq 1 100); do
  addr=$(grep -o 'addr=http://127\.0\.0\.1:[0-9]*' "$work/herald.log" | head -1 | sed 's|addr=http://||' || true)
  [ -n "$addr" ] && break
  kill -0 "$herald_pid" 2>/dev/null || { cat "$work/herald.log"; echo "herald exited"; exit 1; }
  sleep 0.1
done
[ -n "$addr" ] || { cat "$work/herald.log"; echo "herald did not log its address"; exit 1; }
echo "== herald on $addr"

fail() { echo "FAIL: $*"; cat "$work/herald.log"; exit 1; }
