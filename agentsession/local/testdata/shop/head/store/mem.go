package store

// MemStore keeps records in memory.
type MemStore struct {
	data map[string]string
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{data: map[string]string{}}
}

// Get returns the record of key.
func (m *MemStore) Get(key string) (string, error) {
	v, ok := m.data[key]
	if !ok {
		return "", ErrNotFound
	}
	return v, nil
}

// Put stores a record.
func (m *MemStore) Put(key, value string) error {
	m.data[key] = value
	return nil
}
