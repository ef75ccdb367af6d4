//go:build unix

package codesearch

import (
	"slices"
	"syscall"
)

// readFile reads the regular file at p into buf, unless it is larger than
// maxSize bytes or cannot be read. It uses plain system calls (open, read,
// close: no stat, no poller) since a search reads thousands of small files,
// does not follow a symbolic link put in place of the file, and takes a
// short read as the end of the file, as it is for regular files.
func readFile(p string, maxSize int64, buf []byte) ([]byte, bool) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return buf[:0], false
	}
	defer syscall.Close(fd)
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(len(buf), 16<<10))
		}
		want := cap(buf) - len(buf)
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n < 0 {
			return buf[:0], false
		}
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > maxSize {
			return buf[:0], false
		}
		if n < want {
			return buf, true // end of file
		}
	}
}
