package store

// FileStore keeps records in files of a folder.
type FileStore struct {
	dir string
}

// Get reads the record of key.
func (f FileStore) Get(key string) (string, error) {
	return "", ErrNotFound
}
