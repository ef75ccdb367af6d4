// Package store keeps the shop's records.
package store

// Store is where records live.
type Store interface {
	Get(key string) (string, error)
	Put(key, value string) error
}
