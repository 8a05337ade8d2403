#!/usr/bin/env bash
# Measures what telemetry costs the end-to-end benchmark: the bench test
# binary is built once, then run ROUNDS times with telemetry off and on
# (OTLP/HTTP traces and metrics to bench/otlpsink on loopback), alternating
# so that a change in the machine's load falls on both. Prints each run's
# BenchmarkEndToEnd line, tagged off/on; docs/benchmarks.md explains them.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${ROUNDS:-3}"
benchtime="${BENCHTIME:-3x}"
bin="$(mktemp -d)"
trap 'kill "$sink" 2>/dev/null || true; rm -rf "$bin"' EXIT
go test -c -o "$bin/bench.test" ./bench/
go build -o "$bin/otlpsink" ./bench/otlpsink
port="${OTLP_PORT:-14318}"
"$bin/otlpsink" -addr "127.0.0.1:$port" &
sink=$!
run() {
  (cd bench && "$bin/bench.test" -test.run '^$' -test.bench '^BenchmarkEndToEnd$' -test.benchtime "$benchtime" -test.benchmem) |
    grep '^BenchmarkEndToEnd' | sed "s/^/$1 /"
}
for _ in $(seq "$rounds"); do
  OTEL_SDK_DISABLED=true run off
  OTEL_TRACES_EXPORTER=otlp OTEL_METRICS_EXPORTER=otlp OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf \
    OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$port" run on
done
