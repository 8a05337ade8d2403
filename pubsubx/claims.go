package pubsubx

import "encoding/json"

// The broker's side of the claim-check (see Size limits in the package
// doc): which events go as references, and what a reference looks like
// on the broker. Storing and reading the claims is the lease store's
// (package delivery holds the policy: what a missing claim means).

// NeedsClaim reports whether body is bigger than b carries
// (MaxMessageBytes), so that a publisher must store it as a claim and
// send a reference (MakeReference) instead.
func (b *Broker) NeedsClaim(body []byte) bool {
	limit := b.MaxMessageBytes()
	return limit > 0 && len(body) > limit
}

// claimRef is the body of a claim-check reference.
type claimRef struct {
	Claim string `json:"herald_claim"`
}

// MakeReference turns m into the claim-check reference of claim id: its
// Body becomes {"herald_claim":"<id>"} and AttrClaim is set to id; its
// other attributes stay, so broker filters work on it unchanged.
func MakeReference(m *Message, id string) {
	m.Body, _ = json.Marshal(claimRef{Claim: id})
	if m.Metadata == nil {
		m.Metadata = map[string]string{}
	}
	m.Metadata[AttrClaim] = id
}

// ClaimOf returns the id of the claim m refers to, or "" when m is an
// ordinary message carrying its event.
func ClaimOf(m *Message) string { return m.Metadata[AttrClaim] }
