// Package stack starts the broker and store stacks Herald's benchmarks run
// on (bench/peer, bench/streams), and the server processes of a run, and
// reads their CPU time from /proc.
package stack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	natsgo "github.com/nats-io/nats.go"
	amqp "github.com/rabbitmq/amqp091-go"
)

// A Stack is the broker and store a Herald run sits on, and the
// processes besides Herald whose CPU the run is charged with.
//
//	mem        in-memory broker and store, inside the Herald process
//	nats-pg    NATS JetStream (a nats-server this bench starts) + PostgreSQL
//	rabbit-pg  RabbitMQ + PostgreSQL
//	nats-mem   NATS JetStream + the in-memory store
//	mem-pg     the in-memory broker + PostgreSQL
//
// PostgreSQL and RabbitMQ are the servers already running on loopback
// (PEER_PG_URL, default postgres://postgres@127.0.0.1:5432/postgres;
// PEER_AMQP_URL, default amqp://guest:guest@127.0.0.1:5672/). Each run gets
// a database, a JetStream stream and an exchange of its own, dropped after.
type Stack struct {
	Name   string
	Env    []string    // HERALD_* variables for each Herald process
	Others []ProcGroup // the processes besides Herald doing the work
	Close  func()      // drops what the run made
	NATS   *Server     // the nats-server this run started, if any
	// counters reads the store's own operation counts (PostgreSQL's
	// pg_stat_database for the run's database); nil for other stores.
	Counters func() (map[string]int64, error)
}

// ProcGroup names a set of processes whose CPU counts together.
type ProcGroup struct {
	Name string
	CPU  func() (time.Duration, error)
}

// Names lists the stacks Open accepts.
var Names = []string{"mem", "nats-pg", "rabbit-pg", "nats-mem", "mem-pg"}

var runSeq int

// Open prepares one run's broker and store: name is one of Names,
// natsBin the nats-server binary (for the nats stacks). Stack.Close drops
// what it made.
func Open(name, natsBin string) (*Stack, error) {
	runSeq++
	id := fmt.Sprintf("bench%d_%d", os.Getpid(), runSeq)
	st := &Stack{Name: name, Close: func() {}}
	brokerKind, storeKind, ok := strings.Cut(name, "-")
	if !ok {
		brokerKind, storeKind = name, name
	}
	var closers []func()
	st.Close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*Stack, error) {
		st.Close()
		return nil, err
	}
	switch brokerKind {
	case "mem":
		st.Env = append(st.Env, "HERALD_TOPIC_URL=mem://"+id)
	case "nats":
		srv, url, err := StartNATS(natsBin, false)
		if err != nil {
			return fail(err)
		}
		closers = append(closers, srv.Stop)
		st.NATS = srv
		st.Env = append(st.Env, "HERALD_TOPIC_URL="+url+"/"+strings.ReplaceAll(id, "_", "-"))
		pid := srv.Cmd.Process.Pid
		st.Others = append(st.Others, ProcGroup{"nats", func() (time.Duration, error) { return CPUOf(pid) }})
	case "rabbit":
		amqpURL := EnvOr("PEER_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
		st.Env = append(st.Env, "HERALD_TOPIC_URL=rabbit://"+id+"?url="+amqpURL)
		st.Others = append(st.Others, ProcGroup{"rabbitmq", func() (time.Duration, error) { return CPUOfNamed("beam.smp") }})
		closers = append(closers, func() { deleteRabbit(amqpURL, id) })
	default:
		return fail(fmt.Errorf("stack: unknown stack %q (want one of %s)", name, strings.Join(Names, ", ")))
	}
	switch storeKind {
	case "mem":
		st.Env = append(st.Env, "HERALD_STORE_URL=mem://"+id+"/key")
	case "pg":
		admin := EnvOr("PEER_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			return fail(fmt.Errorf("stack: PostgreSQL at %s: %w", admin, err))
		}
		_, err = conn.Exec(ctx, "CREATE DATABASE "+id)
		conn.Close(ctx)
		if err != nil {
			return fail(err)
		}
		closers = append(closers, func() { dropDatabase(admin, id) })
		i := strings.LastIndex(admin, "/")
		if i < len("postgres://") {
			return fail(fmt.Errorf("stack: PEER_PG_URL %q names no database", admin))
		}
		u := admin[:i+1] + id
		st.Env = append(st.Env, "HERALD_STORE_URL="+u+"?table=herald")
		st.Others = append(st.Others, ProcGroup{"postgres", func() (time.Duration, error) { return CPUOfPostgres(admin, id) }})
		st.Counters = func() (map[string]int64, error) { return pgCounters(admin, id) }
	default:
		return fail(fmt.Errorf("stack: unknown stack %q", name))
	}
	return st, nil
}

// EnvOr is environment variable k, or def when it is unset or empty.
func EnvOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// StartNATS starts a nats-server with JetStream on a free loopback port,
// with file storage in its own directory (memory: memory storage only).
func StartNATS(bin string, memory bool) (*Server, string, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, "", err
	}
	host, port, _ := net.SplitHostPort(addr)
	args := []string{"-js", "-a", host, "-p", port, "-sd", "."}
	if memory {
		args = append(args, "-m", "0")
	}
	if port := os.Getenv("PEER_NATS_PROFILE_PORT"); port != "" {
		// nats-server then serves Go's profiles on 127.0.0.1:PORT/debug/pprof/.
		args = append(args, "--profile", port)
	}
	srv, err := Start(bin, args, nil, io.Discard)
	if err != nil {
		return nil, "", err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		nc, err := natsgo.Connect("nats://" + addr)
		if err == nil {
			nc.Close()
			break
		}
		if time.Now().After(deadline) {
			srv.Stop()
			return nil, "", fmt.Errorf("nats-server did not start: %w", err)
		}
	}
	return srv, "nats://" + addr, nil
}

func dropDatabase(admin, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
}

// deleteRabbit deletes the run's exchange (best effort; the run deletes
// its destinations, and with them their queues, itself).
func deleteRabbit(url, exchange string) {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	_ = ch.ExchangeDelete(exchange, false, false)
}

// CPUOfNamed sums the CPU of every process whose command name is comm.
func CPUOfNamed(comm string) (time.Duration, error) {
	var total time.Duration
	pids, err := filepath.Glob("/proc/[0-9]*/comm")
	if err != nil {
		return 0, err
	}
	for _, p := range pids {
		b, err := os.ReadFile(p)
		if err != nil || string(bytes.TrimSpace(b)) != comm {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if c, err := CPUOf(pid); err == nil {
			total += c
		}
	}
	return total, nil
}

// CPUOfPostgres is the CPU of the PostgreSQL processes serving database
// db (the backends connected to it now) plus the server's shared workers
// (WAL writer, background writer, checkpointer, autovacuum launcher),
// which do their share of every write. Backends that exited are counted
// through the postmaster's waited-for children time.
func CPUOfPostgres(admin, db string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE (datname = $1 AND pid <> pg_backend_pid())
		   OR backend_type IN ('walwriter', 'background writer', 'checkpointer', 'autovacuum launcher', 'logical replication launcher')`, db)
	if err != nil {
		return 0, err
	}
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return 0, err
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var total time.Duration
	for _, pid := range pids {
		if c, err := CPUOf(pid); err == nil {
			total += c
		}
	}
	return total, nil
}

// pgCounters reads database db's statistics: transactions committed and
// rows returned, inserted, updated and deleted. PostgreSQL reports them
// with a delay of up to stats_fetch_consistency's snapshot; the run waits
// a moment before its last read (see measure).
func pgCounters(admin, db string) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	var commits, rolls, fetched, ins, upd, del int64
	err = conn.QueryRow(ctx, `SELECT xact_commit, xact_rollback, tup_fetched, tup_inserted, tup_updated, tup_deleted
		FROM pg_stat_database WHERE datname = $1`, db).Scan(&commits, &rolls, &fetched, &ins, &upd, &del)
	if err != nil {
		return nil, err
	}
	return map[string]int64{"xact": commits, "rollback": rolls, "fetched": fetched, "inserted": ins, "updated": upd, "deleted": del}, nil
}

// ClockTicks is USER_HZ, the unit of /proc/PID/stat's times on Linux.
const ClockTicks = 100

// FreeAddr returns a loopback address with a port free right now.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// CPUOf is the CPU time (user + system, all threads) process pid has used.
func CPUOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields count from after it.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cannot read /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * time.Second / ClockTicks, nil
}

// Server is a started server process, running in a temporary directory
// of its own.
type Server struct {
	Cmd     *exec.Cmd
	Dir     string
	stopped bool
}

// Start starts bin with args in a fresh temporary directory, with env
// added to this process's environment; its stdout is dropped and its
// stderr goes to stderr.
func Start(bin string, args, env []string, stderr io.Writer) (*Server, error) {
	dir, err := os.MkdirTemp("", "herald-bench-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Server{Cmd: cmd, Dir: dir}, nil
}

// Stop interrupts the server, kills it if it has not exited 5 s later,
// and removes its directory.
func (s *Server) Stop() { s.StopWithin(5 * time.Second) }

// StopWithin interrupts the server, kills it if it has not exited within
// grace, and removes its directory. It returns how long the server took
// to exit and whether it had to be killed. Calls after the first return
// at once.
func (s *Server) StopWithin(grace time.Duration) (took time.Duration, killed bool) {
	if s.stopped {
		return 0, false
	}
	s.stopped = true
	t0 := time.Now()
	_ = s.Cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = s.Cmd.Process.Kill()
		<-done
		killed = true
	}
	took = time.Since(t0)
	os.RemoveAll(s.Dir)
	return took, killed
}
