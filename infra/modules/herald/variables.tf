variable "project_id" {
  description = "Google Cloud project to deploy Herald into."
  type        = string
}

variable "region" {
  description = "Region of the Cloud Run service and the Cloud Scheduler job."
  type        = string
}

variable "name" {
  description = "Name of the Cloud Run service; also the prefix of the other resources."
  type        = string
  default     = "herald"
}

variable "image" {
  description = "Container image built from the repository's Dockerfile (functions/cmd/cloudrun)."
  type        = string
}

variable "topic_name" {
  description = "Pub/Sub topic of the deployment. Herald creates one subscription per durable consumer on it at run time."
  type        = string
  default     = "herald-events"
}

variable "firestore_database" {
  description = "Name of the Firestore (native mode) database that holds the lease store."
  type        = string
  default     = "herald"
}

variable "firestore_location" {
  description = "Location of the Firestore database, e.g. eur3, nam5 or a region."
  type        = string
}

variable "collection" {
  description = "Firestore collection of the lease store."
  type        = string
  default     = "herald"
}

variable "tokens" {
  description = "Bearer tokens (HERALD_TOKENS): token => {id, permissions}. Each token is at least 16 characters."
  type = map(object({
    id          = string
    permissions = list(string)
  }))
  sensitive = true
}

variable "jobs_token" {
  description = "Bearer token Cloud Scheduler sends to POST /v1/jobs/lease-expiry; it is given only the run:jobs permission. At least 16 characters."
  type        = string
  sensitive   = true
  validation {
    condition     = length(var.jobs_token) >= 16
    error_message = "jobs_token must be at least 16 characters."
  }
}

variable "event_source" {
  description = "HERALD_SOURCE: the CloudEvents source of published events."
  type        = string
  default     = "/herald"
}

variable "receive_wait" {
  description = "HERALD_RECEIVE_WAIT: how long a pull waits for new events before answering 204 (Go duration, 0s to 20s)."
  type        = string
  default     = "0s"
}

variable "max_lease_bytes" {
  description = "HERALD_MAX_LEASE_BYTES: the most encoded event bytes in one lease (4096 to 1000000)."
  type        = number
  default     = 350000
}

variable "lease_expiry_schedule" {
  description = "Cron schedule of the lease-expiry job (Cloud Scheduler syntax)."
  type        = string
  default     = "* * * * *"
}

variable "reap_idle_queues_schedule" {
  description = "Cron schedule of the reap-idle-queues job, which deletes idle durable and non-durable queues (Cloud Scheduler syntax)."
  type        = string
  default     = "* * * * *"
}

variable "push_webhooks_schedule" {
  description = "Cron schedule of the push-webhooks job, which POSTs the due events of every webhook destination (Cloud Scheduler syntax)."
  type        = string
  default     = "* * * * *"
}

variable "min_instances" {
  description = "Minimum Cloud Run instances (0 scales to zero)."
  type        = number
  default     = 0
}

variable "max_instances" {
  description = "Maximum Cloud Run instances."
  type        = number
  default     = 10
}

variable "http2_end_to_end" {
  description = "Have Cloud Run forward requests to Herald as HTTP/2 cleartext (h2c), which native gRPC streaming (ConsumeDurableEventsWithAcks and the other streams) needs. Then every request reaches Herald as HTTP/2, where WebSocket upgrades are HTTP/1.1 only: run a second service without it for the WebSocket endpoint. gRPC-Web, Connect, REST and SSE work either way."
  type        = bool
  default     = false
}

variable "public" {
  description = "Let anyone reach the service (allUsers may invoke it). Herald checks bearer tokens itself, so the API needs this unless a gateway in front of it invokes Cloud Run with its own identity."
  type        = bool
  default     = true
}

variable "jwt" {
  description = "An identity provider whose JWTs are accepted beside the tokens (docs/auth.md): the HERALD_JWT_* variables. issuer (or jwks_url) and audience switch it on; audience is comma-separated; grants maps a principal to more permissions."
  type = object({
    issuer            = optional(string, "")
    jwks_url          = optional(string, "")
    audience          = optional(string, "")
    permissions_claim = optional(string, "scope")
    principal_claim   = optional(string, "sub")
    algorithms        = optional(string, "")
    scope_prefix      = optional(string, "")
    grants            = optional(map(list(string)), {})
  })
  default = {}
}

variable "cors_origins" {
  description = "HERALD_CORS_ORIGINS: browser origins (https://app.example.com) allowed to call Herald and open its WebSocket; empty for none."
  type        = list(string)
  default     = []
}

variable "telemetry" {
  description = "OpenTelemetry (docs/telemetry.md): the standard OTEL_* variables. traces_exporter and metrics_exporter (otlp, prometheus for metrics, console, none) switch it on; on Cloud Run send OTLP to a collector sidecar on localhost (or through it to Google's OTLP endpoint). sdk_disabled = \"true\" turns it off whatever the rest says; prometheus_host/_port are where /metrics is served for a sidecar to scrape."
  type = object({
    sdk_disabled        = optional(string, "false")
    service_name        = optional(string, "herald")
    resource_attributes = optional(string, "")
    traces_exporter     = optional(string, "none")
    metrics_exporter    = optional(string, "none")
    otlp_endpoint       = optional(string, "http://localhost:4318")
    otlp_protocol       = optional(string, "http/protobuf")
    prometheus_host     = optional(string, "localhost")
    prometheus_port     = optional(number, 9464)
  })
  default = {}
  validation {
    condition     = contains(["none", "otlp", "console"], var.telemetry.traces_exporter) && contains(["none", "otlp", "prometheus", "console"], var.telemetry.metrics_exporter)
    error_message = "telemetry.traces_exporter is none, otlp or console; telemetry.metrics_exporter none, otlp, prometheus or console."
  }
}
