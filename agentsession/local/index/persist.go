package index

import (
	"bufio"
	"encoding/gob"
	"fmt"
	"os"
	"path/filepath"
)

// formatVersion changes whenever the saved form of an Index does, so that
// an older file is rebuilt rather than misread.
const formatVersion = 1

type saved struct {
	Version int
	Index   *Index
}

// Save writes ix to file (atomically: a temporary file renamed).
func (ix *Index) Save(file string) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".index-*")
	if err != nil {
		return fmt.Errorf("save the index: %w", err)
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriterSize(tmp, 1<<20)
	if err := gob.NewEncoder(w).Encode(saved{Version: formatVersion, Index: ix}); err != nil {
		tmp.Close()
		return fmt.Errorf("save the index: %w", err)
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("save the index: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save the index: %w", err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("save the index: %w", err)
	}
	return nil
}

// Load reads an index Save wrote for the commits head and base; it fails
// when the file is missing, of another format or of other commits.
func Load(file, head, base string) (*Index, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var s saved
	if err := gob.NewDecoder(bufio.NewReaderSize(f, 1<<20)).Decode(&s); err != nil {
		return nil, fmt.Errorf("load the index %s: %w", file, err)
	}
	if s.Version != formatVersion || s.Index == nil || s.Index.Head != head || s.Index.Base != base {
		return nil, fmt.Errorf("load the index %s: made for other commits or by another version", file)
	}
	s.Index.finish()
	return s.Index, nil
}
