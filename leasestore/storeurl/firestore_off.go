//go:build herald_aws

package storeurl

// This build (herald_aws) leaves Firestore out: Open refuses firestore://
// URLs, and the Firestore client is not linked.

// noFirestore is the placeholder type of Opener.Firestore in this build; the
// field stays nil.
type noFirestore struct{}

type firestoreClient = *noFirestore

var openFirestore openFunc
