#!/usr/bin/env bash
# Starts the machine services the real-server suites use, if they are down.
# Emulators (moto, Pub/Sub, Firestore) are started by the tests themselves on
# free ports.
set -uo pipefail

up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if ! up 5672; then
  echo "== starting RabbitMQ"
  rabbitmq-server -detached || true
fi
if ! up 4222; then
  echo "== starting NATS with JetStream"
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log || true
fi
if ! up 5432; then
  echo "== starting PostgreSQL"
  pg_ctlcluster "$(ls /etc/postgresql | sort -V | tail -1)" main start || service postgresql start || true
fi
failed=0
for port in 5672 4222 5432; do
  for _ in $(seq 1 60); do up "$port" && break; sleep 1; done
  if up "$port"; then
    echo "== port $port is up"
  else
    echo "== nothing listens on 127.0.0.1:$port"
    failed=1
  fi
done
for bin in moto_server python3 java; do
  command -v "$bin" >/dev/null || { echo "== $bin is not installed"; failed=1; }
done
exit "$failed"
