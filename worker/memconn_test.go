package worker

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prchat/prchat/chat/chattest"
)

// memConnPair returns the two ends of an in-memory connection, closed when
// the test ends.
func memConnPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	a, b := newMemConns()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b
}

// readAll reads n bytes from c, failing the test past chattest's patience.
func readAll(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(chattest.Patience()))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	return b
}

// requireTimeout fails the test unless err is a read deadline's error, as
// go-redis expects it from a socket.
func requireTimeout(t *testing.T, err error) {
	t.Helper()
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("got %v, want a timeout net.Error wrapping os.ErrDeadlineExceeded", err)
	}
}

// TestMemConnRoundTrip: what one end writes the other reads, both ways.
func TestMemConnRoundTrip(t *testing.T) {
	t.Parallel()
	a, b := memConnPair(t)
	if _, err := a.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, b, 4); string(got) != "ping" {
		t.Fatalf("b read %q", got)
	}
	if _, err := b.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, a, 4); string(got) != "pong" {
		t.Fatalf("a read %q", got)
	}
	if a.LocalAddr().Network() != "memory" || b.RemoteAddr().Network() != "memory" {
		t.Fatalf("addresses %v, %v are not of the network memory", a.LocalAddr(), b.RemoteAddr())
	}
}

// TestMemConnLargeWritesBothWays: both ends write 1 MiB before either
// reads, which deadlocks a synchronous pipe.
func TestMemConnLargeWritesBothWays(t *testing.T) {
	t.Parallel()
	a, b := memConnPair(t)
	const size = 1 << 20
	wa, wb := bytes.Repeat([]byte("a"), size), bytes.Repeat([]byte("b"), size)
	var wg sync.WaitGroup
	for _, w := range []struct {
		c net.Conn
		b []byte
	}{{a, wa}, {b, wb}} {
		wg.Go(func() {
			if n, err := w.c.Write(w.b); n != size || err != nil {
				t.Errorf("write: %d, %v", n, err)
			}
		})
	}
	wg.Wait() // writes do not wait for a reader
	if !bytes.Equal(readAll(t, a, size), wb) || !bytes.Equal(readAll(t, b, size), wa) {
		t.Fatal("the bytes read are not the bytes written")
	}
}

// TestMemConnReadDeadline: a Read past its deadline, or blocked when it
// passes, returns a timeout; a deadline set during a Read takes effect;
// the zero time clears it.
func TestMemConnReadDeadline(t *testing.T) {
	t.Parallel()
	a, b := memConnPair(t)
	buf := make([]byte, 8)

	_ = a.SetReadDeadline(time.Now().Add(-time.Second))
	_, err := a.Read(buf)
	requireTimeout(t, err)

	_ = a.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	start := time.Now()
	_, err = a.Read(buf)
	requireTimeout(t, err)
	if d := time.Since(start); d < 40*time.Millisecond { // a lower bound a loaded machine cannot break
		t.Fatalf("a Read with a 50ms deadline returned after %v", d)
	}

	// A Read blocked without a deadline is woken by one set meanwhile.
	_ = a.SetReadDeadline(time.Time{})
	errc := make(chan error, 1)
	go func() { _, err := a.Read(buf); errc <- err }()
	// A while for the Read to block, not a wait for a condition: a Read
	// not yet blocked meets the deadline the same way.
	time.Sleep(20 * time.Millisecond)
	_ = a.SetReadDeadline(time.Now().Add(-time.Second))
	requireTimeout(t, chattest.Receive(t, "a deadline set during a Read to end it", errc))

	// A deadline past fails a Read even with data, as on a socket;
	// cleared, it no longer does.
	if _, err := b.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	_, err = a.Read(buf)
	requireTimeout(t, err)
	_ = a.SetDeadline(time.Time{})
	if n, err := a.Read(buf); n != 1 || err != nil {
		t.Fatalf("read after clearing the deadline: %d, %v", n, err)
	}
	// A write deadline in the past fails writes.
	_ = a.SetWriteDeadline(time.Now().Add(-time.Second))
	_, err = a.Write([]byte("x"))
	requireTimeout(t, err)
}

// TestMemConnClose: the peer of a closed end reads what it wrote, then
// io.EOF; the closed end's own Read and Write fail with net.ErrClosed; a
// Read blocked on the closing end returns.
func TestMemConnClose(t *testing.T) {
	t.Parallel()
	a, b := memConnPair(t)
	errc := make(chan error, 1)
	go func() { _, err := b.Read(make([]byte, 1)); errc <- err }()
	// A while for the Read to block, not a wait for a condition: a Read
	// not yet blocked reads the same.
	time.Sleep(20 * time.Millisecond)
	if _, err := a.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	if err := chattest.Receive(t, "the blocked read", errc); err != nil {
		t.Fatalf("a blocked read got %v", err)
	}
	go func() { _, err := a.Read(make([]byte, 1)); errc <- err }()
	time.Sleep(20 * time.Millisecond) // as above
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := chattest.Receive(t, "Close to end a Read blocked on its end", errc); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a read blocked on the closed end got %v, want net.ErrClosed", err)
	}
	if got := readAll(t, b, 2); string(got) != "ye" {
		t.Fatalf("the peer read %q after close, want the rest of what was written", got)
	}
	if _, err := b.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the peer's read after the data got %v, want io.EOF", err)
	}
	if _, err := b.Write([]byte("x")); err == nil {
		t.Fatal("a write to a closed peer succeeded")
	}
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on the closed end: %v, want net.ErrClosed", err)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write on the closed end: %v, want net.ErrClosed", err)
	}
}

// TestMemConnWritesDoNotInterleave: concurrent Writes each arrive whole.
func TestMemConnWritesDoNotInterleave(t *testing.T) {
	t.Parallel()
	a, b := memConnPair(t)
	const writers, writes, size = 8, 50, 4096
	var wg sync.WaitGroup
	for w := range writers {
		msg := bytes.Repeat([]byte{byte('A' + w)}, size)
		wg.Go(func() {
			for range writes {
				if _, err := a.Write(msg); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	got := readAll(t, b, writers*writes*size)
	wg.Wait()
	for i := 0; i < len(got); i += size {
		if block := got[i : i+size]; !bytes.Equal(block, bytes.Repeat(block[:1], size)) {
			t.Fatalf("the write at offset %d is mixed with another", i)
		}
	}
}
