package store

import "os"

// FileStore keeps records in files of a folder.
type FileStore struct {
	dir string
}

// Get reads the record of key.
func (f *FileStore) Get(key string) (string, error) {
	b, err := os.ReadFile(f.dir + "/" + key)
	if err != nil {
		return "", ErrNotFound
	}
	return string(b), nil
}

// Put writes the record of key.
func (f *FileStore) Put(key, value string) error {
	return os.WriteFile(f.dir+"/"+key, []byte(value), 0o600)
}
