package store

import (
	"errors"
	"testing"
)

func TestMemStoreGet(t *testing.T) {
	m := NewMemStore()
	if _, err := m.Get("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get = %v, want ErrNotFound", err)
	}
}
