package faults

import (
	"errors"
	"testing"
)

// TestHooksCompose: hooks set by cases running side by side each fail
// their own steps, and removing one leaves the other in place.
func TestHooksCompose(t *testing.T) {
	errA, errB := errors.New("a"), errors.New("b")
	only := func(id string, err error) func(string, string) error {
		return func(_, c string) error {
			if c == id {
				return err
			}
			return nil
		}
	}
	if err := Check(Reserve, "a"); err != nil {
		t.Fatalf("no hook set: %v", err)
	}
	restoreA := Set(only("a", errA))
	restoreB := Set(only("b", errB))
	if err := Check(Reserve, "a"); !errors.Is(err, errA) {
		t.Fatalf("a: got %v", err)
	}
	if err := Check(Reserve, "b"); !errors.Is(err, errB) {
		t.Fatalf("b: got %v", err)
	}
	if err := Check(Reserve, "c"); err != nil {
		t.Fatalf("c: got %v", err)
	}
	restoreA()
	restoreA() // a second call removes nothing else
	if err := Check(Reserve, "a"); err != nil {
		t.Fatalf("a after its restore: %v", err)
	}
	if err := Check(Reserve, "b"); !errors.Is(err, errB) {
		t.Fatalf("b after a's restore: %v", err)
	}
	restoreB()
	if hooks.Load() != nil {
		t.Fatal("hooks left after every restore")
	}
}
