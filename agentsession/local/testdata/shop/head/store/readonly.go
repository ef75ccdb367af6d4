package store

// ReadOnlyStore serves records it was given and refuses writes.
type ReadOnlyStore struct {
	records map[string]string
}

// Get returns the record of key.
func (r ReadOnlyStore) Get(key string) (string, error) {
	if v, ok := r.records[key]; ok {
		return v, nil
	}
	return "", ErrNotFound
}
