//go:build herald_gcp

package storeurl

// This build (herald_gcp) leaves DynamoDB out: Open refuses dynamodb://
// URLs, and the DynamoDB client is not linked.

// noDynamoDB is the placeholder type of Opener.DynamoDB in this build; the
// field stays nil.
type noDynamoDB struct{}

type dynamoDBClient = *noDynamoDB

var openDynamoDB openFunc
