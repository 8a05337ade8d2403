variable "name" {
  description = "Prefix of every resource's name (the function, its role, the API)."
  type        = string
  default     = "herald"
}

variable "bootstrap_zip" {
  description = "Path to the Lambda bootstrap zip built by `make lambda` (dist/arm64/bootstrap.zip)."
  type        = string
}

variable "architecture" {
  description = "Lambda architecture of bootstrap_zip: arm64 or x86_64."
  type        = string
  default     = "arm64"
}

variable "tokens" {
  description = "HERALD_TOKENS: JSON object from bearer token (at least 16 characters) to {\"id\", \"permissions\"}."
  type        = string
  sensitive   = true
}

variable "topic_name" {
  description = "Name of the deployment's SNS topic (at most 16 characters); the SQS queues of its consumers are named \"<topic_name>-...\"."
  type        = string
}

variable "topic_arn" {
  description = "ARN of the deployment's SNS topic."
  type        = string
}

variable "lease_table_name" {
  description = "Name of the lease-store DynamoDB table (partition key \"key\", type S; TTL on attribute \"ttl\", as template.yaml's LeaseTable has, so that idempotency keys expire)."
  type        = string
}

variable "lease_table_arn" {
  description = "ARN of the lease-store DynamoDB table."
  type        = string
}

variable "stage_name" {
  description = "Stage of the WebSocket API: the path of its wss:// URL."
  type        = string
  default     = "prod"
}

variable "poll_wait" {
  description = "HERALD_WS_POLL_WAIT: how long one demand frame's pull waits at SQS (0s-20s)."
  type        = string
  default     = "5s"
}

variable "session_ttl" {
  description = "HERALD_WS_SESSION_TTL: how long a session stays attached without a demand frame (1m-2h)."
  type        = string
  default     = "10m"
}

variable "max_lease_bytes" {
  description = "HERALD_MAX_LEASE_BYTES: most encoded event bytes in one lease (at most 350000 on DynamoDB)."
  type        = number
  default     = 350000
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

variable "telemetry" {
  description = "OpenTelemetry (docs/telemetry.md): the standard OTEL_* variables. traces_exporter and metrics_exporter (otlp, console, none) switch it on; send OTLP to a collector extension layer on localhost (add the layer to the function). Not prometheus: nothing scrapes a frozen function. sdk_disabled = \"true\" turns it off whatever the rest says."
  type = object({
    sdk_disabled        = optional(string, "false")
    service_name        = optional(string, "herald")
    resource_attributes = optional(string, "")
    traces_exporter     = optional(string, "none")
    metrics_exporter    = optional(string, "none")
    otlp_endpoint       = optional(string, "http://localhost:4318")
    otlp_protocol       = optional(string, "http/protobuf")
  })
  default = {}
  validation {
    condition     = contains(["none", "otlp", "console"], var.telemetry.traces_exporter) && contains(["none", "otlp", "console"], var.telemetry.metrics_exporter)
    error_message = "telemetry.traces_exporter and telemetry.metrics_exporter are none, otlp or console."
  }
}
