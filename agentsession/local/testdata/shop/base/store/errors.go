package store

import "errors"

// ErrNotFound says a key has no record.
var ErrNotFound = errors.New("store: not found")
