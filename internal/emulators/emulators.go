// Package emulators starts the real servers Herald's suites run against, each
// on a free 127.0.0.1 port, and stops them when the test ends:
//
//	Moto      moto_server: SNS, SQS and DynamoDB
//	PubSub    Google's Pub/Sub emulator
//	Firestore Google's Firestore emulator
//	RabbitMQ  the machine's RabbitMQ (already running; only checked)
//	NATS      the machine's NATS with JetStream (already running; only checked)
//	PostgreSQL the machine's PostgreSQL (already running); each caller gets
//	          a database of its own, dropped when the test ends
//
// When a binary or service is absent the test is skipped with the reason,
// unless HERALD_REQUIRE_SERVERS=1 (set by .ci/run), which fails it instead:
// CI has every server, so nothing is skipped there. Under go test -short
// (make test-short, the inner loop) every one of them skips its test
// before touching a server: -short runs no real server, so it needs none
// installed and stays quick.
package emulators

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldevents/herald/internal/testkit"
)

// Paths of the preinstalled emulators.
const (
	PubSubEmulatorPath    = "/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator"
	FirestoreEmulatorPath = "/usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator/cloud_firestore_emulator"
)

// Moto starts moto_server and returns its endpoint, e.g.
// "http://127.0.0.1:41234". Use any credentials and region us-east-1;
// the account id is 123456789012.
func Moto(t testing.TB) string {
	t.Helper()
	short(t, "moto_server")
	bin := lookPath(t, "moto_server")
	port := FreePort(t)
	start(t, "moto_server", port, 30*time.Second, bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

// PubSub starts Google's Pub/Sub emulator and returns its host:port, the
// value for PUBSUB_EMULATOR_HOST.
func PubSub(t testing.TB) string {
	t.Helper()
	short(t, "the Pub/Sub emulator")
	bin := lookPath(t, PubSubEmulatorPath)
	port := FreePort(t)
	start(t, "pubsub emulator", port, 60*time.Second, bin, "--host=127.0.0.1", "--port="+strconv.Itoa(port))
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// Firestore starts Google's Firestore emulator for project and returns its
// host:port, the value for FIRESTORE_EMULATOR_HOST.
func Firestore(t testing.TB, project string) string {
	t.Helper()
	short(t, "the Firestore emulator")
	bin := lookPath(t, FirestoreEmulatorPath)
	port := FreePort(t)
	start(t, "firestore emulator", port, 60*time.Second, bin, "start",
		"--host=127.0.0.1", "--port="+strconv.Itoa(port), "--project_id="+project)
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// RabbitMQ returns the AMQP URL of the machine's RabbitMQ after checking it
// listens.
func RabbitMQ(t testing.TB) string {
	t.Helper()
	short(t, "RabbitMQ")
	service(t, "RabbitMQ", "127.0.0.1:5672")
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// NATS returns the URL of the machine's NATS server after checking it
// listens.
func NATS(t testing.TB) string {
	t.Helper()
	short(t, "NATS")
	service(t, "NATS", "127.0.0.1:4222")
	return "nats://127.0.0.1:4222"
}

// PostgreSQLAddr is where the machine's PostgreSQL listens; user postgres,
// trust authentication.
const PostgreSQLAddr = "127.0.0.1:5432"

// PostgreSQL creates a database of its own for t on the machine's
// PostgreSQL, drops it (closing its connections) when t ends, and returns
// its URL, e.g. "postgres://postgres@127.0.0.1:5432/herald_test_1a2b3c4d".
func PostgreSQL(t testing.TB) string {
	t.Helper()
	short(t, "PostgreSQL")
	service(t, "PostgreSQL", PostgreSQLAddr)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	name := "herald_test_" + hex.EncodeToString(rnd[:])
	admin := func(ctx context.Context, sql string) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, "postgres://postgres@"+PostgreSQLAddr+"/postgres?connect_timeout=10")
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := admin(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("emulators: create PostgreSQL database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := admin(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("emulators: drop PostgreSQL database %s: %v", name, err)
		}
	})
	return "postgres://postgres@" + PostgreSQLAddr + "/" + name
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("emulators: free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// short skips t under go test -short: it needs a real server, which
// -short leaves out (whatever HERALD_REQUIRE_SERVERS says: that asks for
// every server in a full run).
func short(t testing.TB, name string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s, a real server: left out by -short (make test-short); make test runs it", name)
	}
}

func required() bool { return os.Getenv("HERALD_REQUIRE_SERVERS") == "1" }

func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if required() {
		t.Fatalf("%s (HERALD_REQUIRE_SERVERS=1)", msg)
	}
	t.Skipf("%s; install it to run this suite", msg)
}

func lookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, "%s is not installed", name)
	}
	return p
}

func service(t testing.TB, name, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		missing(t, "%s does not listen on %s", name, addr)
		return
	}
	_ = c.Close()
}

// start runs a server in its own process group, waits until port accepts
// connections, and kills the group when the test ends.
func start(t testing.TB, name string, port int, timeout time.Duration, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Own process group, so the Java emulators' child JVMs die with it; and
	// a parent-death signal, so nothing outlives a crashed test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("emulators: start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("emulators: %s exited before listening on %s:\n%s", name, addr, out.String())
		case <-ctx.Done():
			t.Fatalf("emulators: %s did not listen on %s within %v:\n%s", name, addr, timeout, out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
