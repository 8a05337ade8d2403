output "service_url" {
  description = "Herald's base URL."
  value       = module.herald.service_url
}

output "topic_id" {
  description = "The Pub/Sub topic."
  value       = module.herald.topic_id
}
