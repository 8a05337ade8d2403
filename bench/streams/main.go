// Command streams measures Herald's non-durable streams at scale: it
// starts Herald as its own process on a broker and store stack, opens N
// streams over SSE, gRPC or WebSocket, publishes events one at a time and
// times their fan-out to every stream, then idles with the streams open
// and reads what they cost (docs/benchmarks.md, "Streams at scale").
//
// One run, in three phases:
//
//  1. open: N streams (-n), -concurrency (50) at a time, each with the
//     same one filter group (event type bench.fanout); reports stream open
//     p50/p99 (request sent to the "connected" answer: SSE's connected
//     event, gRPC's first response with the reconnect token, WebSocket's
//     connected frame) and streams opened per second;
//  2. fan-out: -events (20) events published one every -every (100 ms),
//     each carrying its sequence number; reports, per event, the time from
//     its publish request to the moment the last stream had it (p50, p99,
//     max over the events), every delivery's latency (p50, p99), and the
//     deliveries missing or duplicated once every stream has every event
//     or -drain (30 s) after the last publish;
//  3. idle: -idle (10 s) with the N streams open and nothing published;
//     reports Herald's CPU (from /proc/PID/stat), the broker's and the
//     database's CPU (bench/internal/stack), PostgreSQL transactions per
//     second, and Herald's RSS, heap and goroutines per stream (the
//     difference from before the streams opened, divided by N; RSS from
//     /proc/PID/status, heap from /debug/vars and goroutines from
//     /debug/pprof/goroutine on HERALD_PPROF_ADDR).
//
// The load generator raises its file-descriptor limit to the hard limit
// (Herald's Go runtime raises its own), and spreads its connections over
// loopback source addresses 127.0.0.1, 127.0.0.2, … (-src-ips; by default
// one per 2,000 streams), as browsers come from many addresses: Herald
// bounds the connections of one client address (HERALD_MAX_CONNS_PER_CLIENT)
// and one source address has ~28,000 ephemeral ports to one server port.
//
// Usage (make bench-streams builds Herald and nats-server first):
//
//	streams -herald BIN -nats-server BIN [-stack mem] [-transport sse] [-n 1000]
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/heraldevents/herald/bench/internal/stack"
)

func main() {
	var c config
	flag.StringVar(&c.herald, "herald", "", "the herald binary (built from ./cmd/herald)")
	flag.StringVar(&c.natsBin, "nats-server", "", "the nats-server binary, for the nats stacks")
	stacks := flag.String("stack", "mem", "the broker and store stacks, comma-separated: "+strings.Join(stack.Names, ", "))
	transports := flag.String("transport", "sse", "the stream transports, comma-separated: sse, grpc, ws")
	flag.IntVar(&c.n, "n", 1000, "streams to open")
	flag.IntVar(&c.concurrency, "concurrency", 50, "streams opening at a time")
	flag.IntVar(&c.events, "events", 20, "events published, one at a time")
	flag.DurationVar(&c.every, "every", 100*time.Millisecond, "time between two publishes")
	flag.DurationVar(&c.drain, "drain", 30*time.Second, "how long after the last publish missing deliveries are waited for")
	flag.DurationVar(&c.idle, "idle", 10*time.Second, "idle phase with every stream open")
	flag.IntVar(&c.srcIPs, "src-ips", 0, "loopback source addresses to spread connections over (0: one per 2,000 streams)")
	flag.StringVar(&c.heapProfile, "heap-profile", "", "write Herald's heap profile at the end of the idle phase to this file")
	flag.StringVar(&c.cpuProfile, "cpu-profile", "", "write Herald's CPU profile of the fan-out phase to this file")
	flag.StringVar(&c.idleCPUProfile, "idle-cpu-profile", "", "write Herald's CPU profile of the idle phase to this file")
	flag.Parse()
	if c.herald == "" {
		log.Fatal("streams: -herald is required (make bench-streams sets it)")
	}
	c.log = os.Stderr
	if err := raiseFileLimit(c.n); err != nil {
		log.Fatal(err)
	}
	printHeader(os.Stdout)
	failed := false
	for _, stk := range strings.Split(*stacks, ",") {
		for _, tr := range strings.Split(*transports, ",") {
			rc := c
			rc.stack, rc.transport = stk, tr
			res, err := run(rc)
			if err != nil {
				log.Printf("streams: %s/%s n=%d: %v", stk, tr, c.n, err)
				failed = true
				continue
			}
			res.print(os.Stdout)
			if res.missing > 0 || res.duplicates > 0 || res.openFailed > 0 {
				failed = true
			}
		}
	}
	if failed {
		os.Exit(1)
	}
}

// printHeader prints the column names of result.print.
func printHeader(w *os.File) {
	fmt.Fprintln(w, "stack/transport      n: open p50/p99 ms, opens/s, failed | fan-out p50/p99/max ms, delivery p50/p99 ms, missing/dup of total, CPU ms/event | idle: herald CPU %, others CPU %, pg xact/s (rows written/s), RSS KB/stream, heap KB/stream, goroutines/stream | machine")
}
