package leasestore

import (
	"encoding/gob"
	"time"
)

// memdocstore's filename option (mem://NAME/key?filename=PATH) saves a
// collection with encoding/gob as maps of interface values, and gob refuses
// any dynamic type it was not told about. Lease records hold lists (the
// lease table, acked ranges, payload events), nested maps and a time, so
// without these registrations closing such a collection fails and a local
// Herald loses its consumers on restart. Registering is idempotent and has
// no effect on other backends.
func init() {
	gob.Register([]any(nil))
	gob.Register(map[string]any(nil))
	gob.Register(time.Time{})
}
