// Command otlpsink is an OTLP/HTTP receiver that accepts every export and
// keeps nothing: the far end for measuring what telemetry costs Herald
// (bench/telemetry.sh), so that the figure is Herald's export work, not a
// collector's. It answers each POST with an empty protobuf response
// (a valid Export*ServiceResponse) and counts the requests it got.
//
//	go run ./bench/otlpsink -addr 127.0.0.1:4318
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:4318", "host:port to listen on")
	flag.Parse()
	var exports, bytes atomic.Int64
	srv := &http.Server{
		Addr:              *addr,
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
			exports.Add(1)
			bytes.Add(n)
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK)
		}),
	}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
		<-stop
		fmt.Fprintf(os.Stderr, "otlpsink: %d exports, %d bytes\n", exports.Load(), bytes.Load())
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
