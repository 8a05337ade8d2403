package delivery

import jsonv2 "github.com/go-json-experiment/json"

// Exposed to the tests, which hold the stored-event fast path to the
// decoder.
type StoredEvent = storedEvent

var ParseStored = parseStored

func DecodeStoredLenient(body []byte, s *StoredEvent) error {
	return jsonv2.Unmarshal(body, s, lenientStored...)
}
