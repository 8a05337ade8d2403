# Herald on Google Cloud: one Cloud Run service serving every function
# (HERALD_FUNCTION=all), the deployment's Pub/Sub topic, a Firestore
# database for the lease store, a Cloud Scheduler job for the lease-expiry
# sweep, and a service account holding only what Herald uses.

locals {
  topic_url = "gcppubsub://projects/${var.project_id}/topics/${google_pubsub_topic.events.name}"
  store_url = "firestore://projects/${var.project_id}/databases/${google_firestore_database.herald.name}/documents/${var.collection}?name_field=key"
  # The scheduler's token joins the operator's tokens with run:jobs only.
  all_tokens = merge(var.tokens, {
    (var.jobs_token) = { id = "cloud-scheduler", permissions = ["run:jobs"] }
  })
}

resource "google_service_account" "herald" {
  project      = var.project_id
  account_id   = "${var.name}-run"
  display_name = "Herald (Cloud Run)"
}

resource "google_pubsub_topic" "events" {
  project = var.project_id
  name    = var.topic_name
}

resource "google_firestore_database" "herald" {
  project     = var.project_id
  name        = var.firestore_database
  location_id = var.firestore_location
  type        = "FIRESTORE_NATIVE"
}

# Idempotency-key records carry their expiry in "expire_at" (a
# timestamp): Firestore deletes them after HERALD_IDEMPOTENCY_WINDOW
# (docs/api.md, "Idempotency keys"). Other records have no "expire_at".
# The field is not indexed: nothing queries it.
resource "google_firestore_field" "idempotency_ttl" {
  project    = var.project_id
  database   = google_firestore_database.herald.name
  collection = var.collection
  field      = "expire_at"

  ttl_config {}
  index_config {}
}

# Pub/Sub: publish to and attach subscriptions to this topic only.
resource "google_project_iam_custom_role" "topic" {
  project     = var.project_id
  role_id     = replace("${var.name}_topic", "-", "_")
  title       = "Herald topic user"
  permissions = ["pubsub.topics.get", "pubsub.topics.publish", "pubsub.topics.attachSubscription"]
}

resource "google_pubsub_topic_iam_member" "herald" {
  project = var.project_id
  topic   = google_pubsub_topic.events.name
  role    = google_project_iam_custom_role.topic.id
  member  = "serviceAccount:${google_service_account.herald.email}"
}

# Pub/Sub: subscriptions are created and deleted at run time (one per
# durable consumer), so these are granted on the project; nothing else in
# Pub/Sub is.
resource "google_project_iam_custom_role" "subscriptions" {
  project = var.project_id
  role_id = replace("${var.name}_subscriptions", "-", "_")
  title   = "Herald subscription manager"
  permissions = [
    "pubsub.subscriptions.create",
    "pubsub.subscriptions.get",
    "pubsub.subscriptions.update",
    "pubsub.subscriptions.delete",
    "pubsub.subscriptions.consume",
  ]
}

resource "google_project_iam_member" "subscriptions" {
  project = var.project_id
  role    = google_project_iam_custom_role.subscriptions.id
  member  = "serviceAccount:${google_service_account.herald.email}"
}

# Firestore: read and write documents of Herald's database only.
resource "google_project_iam_member" "firestore" {
  project = var.project_id
  role    = "roles/datastore.user"
  member  = "serviceAccount:${google_service_account.herald.email}"
  condition {
    title      = "herald-database-only"
    expression = "resource.name == \"projects/${var.project_id}/databases/${google_firestore_database.herald.name}\""
  }
}

# Tokens live in Secret Manager, not in the service's configuration.
resource "google_secret_manager_secret" "tokens" {
  project   = var.project_id
  secret_id = "${var.name}-tokens"
  replication {
    auto {}
  }
}

resource "google_secret_manager_secret_version" "tokens" {
  secret      = google_secret_manager_secret.tokens.id
  secret_data = jsonencode(local.all_tokens)
}

resource "google_secret_manager_secret_iam_member" "tokens" {
  project   = var.project_id
  secret_id = google_secret_manager_secret.tokens.secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.herald.email}"
}

resource "google_cloud_run_v2_service" "herald" {
  project  = var.project_id
  name     = var.name
  location = var.region
  ingress  = "INGRESS_TRAFFIC_ALL"

  template {
    service_account = google_service_account.herald.email
    scaling {
      min_instance_count = var.min_instances
      max_instance_count = var.max_instances
    }
    containers {
      image = var.image
      # Cloud Run sets PORT; the server listens on 0.0.0.0:$PORT and speaks
      # HTTP/1.1 and h2c there. The port named h2c makes Cloud Run forward
      # HTTP/2 end to end (see var.http2_end_to_end).
      dynamic "ports" {
        for_each = var.http2_end_to_end ? [1] : []
        content {
          name           = "h2c"
          container_port = 8080
        }
      }
      env {
        name  = "HERALD_FUNCTION"
        value = "all"
      }
      env {
        name  = "HERALD_TOPIC_URL"
        value = local.topic_url
      }
      env {
        name  = "HERALD_STORE_URL"
        value = local.store_url
      }
      env {
        name  = "HERALD_SOURCE"
        value = var.event_source
      }
      env {
        name  = "HERALD_RECEIVE_WAIT"
        value = var.receive_wait
      }
      env {
        name  = "HERALD_MAX_LEASE_BYTES"
        value = tostring(var.max_lease_bytes)
      }
      env {
        name  = "HERALD_JWT_ISSUER"
        value = var.jwt.issuer
      }
      env {
        name  = "HERALD_JWT_JWKS_URL"
        value = var.jwt.jwks_url
      }
      env {
        name  = "HERALD_JWT_AUDIENCE"
        value = var.jwt.audience
      }
      env {
        name  = "HERALD_JWT_PERMISSIONS_CLAIM"
        value = var.jwt.permissions_claim
      }
      env {
        name  = "HERALD_JWT_PRINCIPAL_CLAIM"
        value = var.jwt.principal_claim
      }
      env {
        name  = "HERALD_JWT_ALGORITHMS"
        value = var.jwt.algorithms
      }
      env {
        name  = "HERALD_JWT_SCOPE_PREFIX"
        value = var.jwt.scope_prefix
      }
      env {
        name  = "HERALD_JWT_GRANTS"
        value = length(var.jwt.grants) == 0 ? "" : jsonencode(var.jwt.grants)
      }
      env {
        name  = "HERALD_CORS_ORIGINS"
        value = join(",", var.cors_origins)
      }
      # OpenTelemetry (docs/telemetry.md), from var.telemetry.
      env {
        name  = "OTEL_SDK_DISABLED"
        value = var.telemetry.sdk_disabled
      }
      env {
        name  = "OTEL_SERVICE_NAME"
        value = var.telemetry.service_name
      }
      env {
        name  = "OTEL_RESOURCE_ATTRIBUTES"
        value = var.telemetry.resource_attributes
      }
      env {
        name  = "OTEL_TRACES_EXPORTER"
        value = var.telemetry.traces_exporter
      }
      env {
        name  = "OTEL_METRICS_EXPORTER"
        value = var.telemetry.metrics_exporter
      }
      env {
        name  = "OTEL_EXPORTER_OTLP_ENDPOINT"
        value = var.telemetry.otlp_endpoint
      }
      env {
        name  = "OTEL_EXPORTER_OTLP_PROTOCOL"
        value = var.telemetry.otlp_protocol
      }
      env {
        name  = "OTEL_EXPORTER_PROMETHEUS_HOST"
        value = var.telemetry.prometheus_host
      }
      env {
        name  = "OTEL_EXPORTER_PROMETHEUS_PORT"
        value = tostring(var.telemetry.prometheus_port)
      }
      env {
        name = "HERALD_TOKENS"
        value_source {
          secret_key_ref {
            secret  = google_secret_manager_secret.tokens.secret_id
            version = "latest"
          }
        }
      }
      # Startup waits for readiness (the broker and the store answer), so a
      # revision that cannot reach them never takes traffic; liveness is the
      # cheap /health, so a broker outage does not restart every instance
      # (a restart would not bring the broker back).
      startup_probe {
        http_get {
          path = "/health/ready"
        }
        timeout_seconds   = 3
        period_seconds    = 5
        failure_threshold = 24
      }
      liveness_probe {
        http_get {
          path = "/health"
        }
        timeout_seconds   = 3
        period_seconds    = 30
        failure_threshold = 3
      }
    }
  }

  depends_on = [
    google_secret_manager_secret_version.tokens,
    google_secret_manager_secret_iam_member.tokens,
  ]
}

resource "google_cloud_run_v2_service_iam_member" "public" {
  count    = var.public ? 1 : 0
  project  = var.project_id
  location = var.region
  name     = google_cloud_run_v2_service.herald.name
  role     = "roles/run.invoker"
  member   = "allUsers"
}

# The lease-expiry sweep, through the service's own auth: the request
# carries the run:jobs token in its Authorization header.
resource "google_cloud_scheduler_job" "lease_expiry" {
  project   = var.project_id
  region    = var.region
  name      = "${var.name}-lease-expiry"
  schedule  = var.lease_expiry_schedule
  time_zone = "Etc/UTC"

  retry_config {
    retry_count = 2
  }

  http_target {
    http_method = "POST"
    uri         = "${google_cloud_run_v2_service.herald.uri}/v1/jobs/lease-expiry"
    headers = {
      Authorization = "Bearer ${var.jobs_token}"
    }
  }
}

resource "google_cloud_scheduler_job" "reap_idle_queues" {
  project   = var.project_id
  region    = var.region
  name      = "${var.name}-reap-idle-queues"
  schedule  = var.reap_idle_queues_schedule
  time_zone = "Etc/UTC"

  retry_config {
    retry_count = 2
  }

  http_target {
    http_method = "POST"
    uri         = "${google_cloud_run_v2_service.herald.uri}/v1/jobs/reap-idle-queues"
    headers = {
      Authorization = "Bearer ${var.jobs_token}"
    }
  }
}

# The webhook push. A schedule rather than Pub/Sub push subscriptions: a
# push subscription per webhook destination would be made at run time
# and deliver without Herald's leases; a run reads every destination and
# keeps all delivery state in the lease store, so runs share the work.
resource "google_cloud_scheduler_job" "push_webhooks" {
  project          = var.project_id
  region           = var.region
  name             = "${var.name}-push-webhooks"
  schedule         = var.push_webhooks_schedule
  time_zone        = "Etc/UTC"
  attempt_deadline = "120s"

  http_target {
    http_method = "POST"
    uri         = "${google_cloud_run_v2_service.herald.uri}/v1/jobs/push-webhooks"
    headers = {
      Authorization = "Bearer ${var.jobs_token}"
    }
  }
}
