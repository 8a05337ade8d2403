package delivery

import (
	"context"

	jsonv2 "github.com/go-json-experiment/json"
)

// Exposed to the tests, which hold the stored-event fast path to the
// decoder.
type StoredEvent = storedEvent

var ParseStored = parseStored

func DecodeStoredLenient(body []byte, s *StoredEvent) error {
	return jsonv2.Unmarshal(body, s, lenientStored...)
}

// RemembersDelivered reports whether st's hub queue keeps the ids of the
// events it delivered (only while a hand-over may still bring spilled
// copies).
func RemembersDelivered(st *Stream) bool {
	st.hq.mu.Lock()
	defer st.hq.mu.Unlock()
	return st.hq.delivered != nil
}

// HoldOpen takes a place among the stream opens in progress, as an open
// under way does; release gives it back.
func HoldOpen(s *Service) (release func(), err error) {
	if err := s.beginOpen(context.Background()); err != nil {
		return nil, err
	}
	return s.endOpen, nil
}
