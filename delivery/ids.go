package delivery

import (
	"crypto/rand"

	"github.com/google/uuid"
)

// newEventID returns a random (version 4, RFC 9562) UUID in its 36-character
// string form: what uuid.NewString returns, with one allocation instead of
// two (uuid.NewRandom reads through an io.Reader, which moves the UUID to
// the heap). Publishing makes one per event. crypto/rand.Read does not
// fail (it crashes the program instead, since Go 1.24).
func newEventID() string {
	var u uuid.UUID
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant RFC 9562 (10xx)
	return u.String()
}
