variable "project_id" {
  description = "Google Cloud project."
  type        = string
}

variable "region" {
  description = "Region for Cloud Run and Cloud Scheduler."
  type        = string
  default     = "europe-west1"
}

variable "firestore_location" {
  description = "Firestore location."
  type        = string
  default     = "eur3"
}

variable "image" {
  description = "Herald's container image (docker build -t IMAGE . at the repository root)."
  type        = string
}

variable "tokens" {
  description = "Bearer tokens: token => {id, permissions}."
  type = map(object({
    id          = string
    permissions = list(string)
  }))
  sensitive = true
}

variable "jobs_token" {
  description = "Token Cloud Scheduler uses for the lease-expiry job."
  type        = string
  sensitive   = true
}
