// Package deploy holds no code: its tests hold the deployment files, which
// are not Go (template.yaml for AWS SAM at the repository root, the
// Terraform under infra/), to the code they deploy. Environment variables
// are checked against functions/config's table, routes against
// functions/router's, so that a variable or route added in code and
// forgotten in a template fails `make test`.
//
// It is a top-level folder because the layout card has no home for tests
// that span the SAM template, infra/ and the functions.
package deploy
