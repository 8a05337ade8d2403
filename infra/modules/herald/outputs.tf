output "service_url" {
  description = "Herald's base URL."
  value       = google_cloud_run_v2_service.herald.uri
}

output "topic_id" {
  description = "The Pub/Sub topic."
  value       = google_pubsub_topic.events.id
}

output "firestore_database" {
  description = "The Firestore database holding the lease store."
  value       = google_firestore_database.herald.name
}

output "service_account_email" {
  description = "The identity the service runs as."
  value       = google_service_account.herald.email
}

output "lease_expiry_job" {
  description = "The Cloud Scheduler job running the lease-expiry sweep."
  value       = google_cloud_scheduler_job.lease_expiry.id
}
