package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	natsgo "github.com/nats-io/nats.go"
	amqp "github.com/rabbitmq/amqp091-go"
)

// A stack is the broker and store a Herald run sits on, and the
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
type stack struct {
	name   string
	env    []string    // HERALD_* variables for each Herald process
	others []procGroup // the processes besides Herald doing the work
	close  func()      // drops what the run made
	nats   *server     // the nats-server this run started, if any
	// counters reads the store's own operation counts (PostgreSQL's
	// pg_stat_database for the run's database); nil for other stores.
	counters func() (map[string]int64, error)
}

// procGroup names a set of processes whose CPU counts together.
type procGroup struct {
	name string
	cpu  func() (time.Duration, error)
}

// stackNames lists the stacks -stacks accepts.
var stackNames = []string{"mem", "nats-pg", "rabbit-pg", "nats-mem", "mem-pg"}

var runSeq int

// openStack prepares one run's broker and store.
func openStack(name, natsBin string) (*stack, error) {
	runSeq++
	id := fmt.Sprintf("peer%d_%d", os.Getpid(), runSeq)
	st := &stack{name: name, close: func() {}}
	brokerKind, storeKind, ok := strings.Cut(name, "-")
	if !ok {
		brokerKind, storeKind = name, name
	}
	var closers []func()
	st.close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*stack, error) {
		st.close()
		return nil, err
	}
	switch brokerKind {
	case "mem":
		st.env = append(st.env, "HERALD_TOPIC_URL=mem://"+id)
	case "nats":
		srv, url, err := startNATS(natsBin, false)
		if err != nil {
			return fail(err)
		}
		closers = append(closers, srv.stop)
		st.nats = srv
		st.env = append(st.env, "HERALD_TOPIC_URL="+url+"/"+strings.ReplaceAll(id, "_", "-"))
		pid := srv.cmd.Process.Pid
		st.others = append(st.others, procGroup{"nats", func() (time.Duration, error) { return cpuOf(pid) }})
	case "rabbit":
		amqpURL := envOr("PEER_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
		st.env = append(st.env, "HERALD_TOPIC_URL=rabbit://"+id+"?url="+amqpURL)
		st.others = append(st.others, procGroup{"rabbitmq", func() (time.Duration, error) { return cpuOfNamed("beam.smp") }})
		closers = append(closers, func() { deleteRabbit(amqpURL, id) })
	default:
		return fail(fmt.Errorf("peer: unknown stack %q (want one of %s)", name, strings.Join(stackNames, ", ")))
	}
	switch storeKind {
	case "mem":
		st.env = append(st.env, "HERALD_STORE_URL=mem://"+id+"/key")
	case "pg":
		admin := envOr("PEER_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			return fail(fmt.Errorf("peer: PostgreSQL at %s: %w", admin, err))
		}
		_, err = conn.Exec(ctx, "CREATE DATABASE "+id)
		conn.Close(ctx)
		if err != nil {
			return fail(err)
		}
		closers = append(closers, func() { dropDatabase(admin, id) })
		i := strings.LastIndex(admin, "/")
		if i < len("postgres://") {
			return fail(fmt.Errorf("peer: PEER_PG_URL %q names no database", admin))
		}
		u := admin[:i+1] + id
		st.env = append(st.env, "HERALD_STORE_URL="+u+"?table=herald")
		st.others = append(st.others, procGroup{"postgres", func() (time.Duration, error) { return cpuOfPostgres(admin, id) }})
		st.counters = func() (map[string]int64, error) { return pgCounters(admin, id) }
	default:
		return fail(fmt.Errorf("peer: unknown stack %q", name))
	}
	return st, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// startNATS starts a nats-server with JetStream on a free loopback port,
// with file storage in its own directory (memory: memory storage only).
func startNATS(bin string, memory bool) (*server, string, error) {
	addr, err := freeAddr()
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
	srv, err := start(bin, args, nil, io.Discard)
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
			srv.stop()
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

// cpuOfNamed sums the CPU of every process whose command name is comm.
func cpuOfNamed(comm string) (time.Duration, error) {
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
		if c, err := cpuOf(pid); err == nil {
			total += c
		}
	}
	return total, nil
}

// cpuOfPostgres is the CPU of the PostgreSQL processes serving database
// db (the backends connected to it now) plus the server's shared workers
// (WAL writer, background writer, checkpointer, autovacuum launcher),
// which do their share of every write. Backends that exited are counted
// through the postmaster's waited-for children time.
func cpuOfPostgres(admin, db string) (time.Duration, error) {
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
		if c, err := cpuOf(pid); err == nil {
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
