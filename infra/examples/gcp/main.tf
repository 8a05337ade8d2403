# Herald in one Google Cloud project. Usage:
#
#   cd infra/examples/gcp
#   terraform init
#   terraform apply -var project_id=my-project -var image=REGION-docker.pkg.dev/my-project/herald/herald:v1 \
#     -var-file=secrets.tfvars   # tokens and jobs_token

terraform {
  required_version = ">= 1.5"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region
}

module "herald" {
  source = "../../modules/herald"

  project_id         = var.project_id
  region             = var.region
  image              = var.image
  firestore_location = var.firestore_location
  tokens             = var.tokens
  jobs_token         = var.jobs_token
}
