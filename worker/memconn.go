package worker

import (
	"bytes"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// memAddr is the address of both ends of a memConn pair.
type memAddr struct{}

// Network is "memory".
func (memAddr) Network() string { return "memory" }

// String names the in-process peer.
func (memAddr) String() string { return "in-process" }

// memPipe is one direction of a memConn pair: the bytes one end wrote and
// the other has not read yet. Writes append to buf and never block, so two
// ends that both write before reading (miniredis answering the head of a
// pipeline go-redis is still writing) cannot deadlock, unlike net.Pipe.
type memPipe struct {
	mu        sync.Mutex
	ready     sync.Cond // broadcast when buf grows, an end closes or the deadline moves
	buf       bytes.Buffer
	wclosed   bool      // the writing end closed: the reader gets io.EOF once buf is drained
	rclosed   bool      // the reading end closed: both ends' operations fail
	rdeadline time.Time // the reader's deadline; zero for none
	wdeadline time.Time // the writer's deadline; zero for none

	// timer wakes a Read blocked past the deadline; it is armed by Read,
	// only when it is about to wait, for timerAt. It may fire for a
	// deadline since moved: Read then looks again and waits on.
	timer   *time.Timer
	timerAt time.Time
}

// newMemPipe returns an empty memPipe.
func newMemPipe() *memPipe {
	p := &memPipe{}
	p.ready.L = &p.mu
	return p
}

// memConn is one end of an in-memory, full-duplex net.Conn pair made by
// newMemConns. It lets the process's Redis clients reach the embedded
// miniredis without the syscalls and poller wake-ups of TCP loopback.
type memConn struct {
	in, out *memPipe // what c reads, what c writes
}

// newMemConns returns the two connected ends of an in-memory connection.
func newMemConns() (*memConn, *memConn) {
	a, b := newMemPipe(), newMemPipe()
	return &memConn{in: a, out: b}, &memConn{in: b, out: a}
}

// Read reads what the peer wrote, blocking until there is some, the peer
// closes (io.EOF once drained), c closes (net.ErrClosed) or the read
// deadline passes (os.ErrDeadlineExceeded, a net.Error whose Timeout is
// true, as for a socket; also as for a socket, a deadline past fails a
// Read even when there is data).
func (c *memConn) Read(b []byte) (int, error) {
	p := c.in
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		switch {
		case p.rclosed:
			return 0, net.ErrClosed
		case past(p.rdeadline):
			return 0, os.ErrDeadlineExceeded
		case p.buf.Len() > 0 || len(b) == 0:
			n, _ := p.buf.Read(b)
			if p.buf.Len() == 0 && p.buf.Cap() > 64<<10 {
				p.buf = bytes.Buffer{} // let a burst's memory go
			}
			return n, nil
		case p.wclosed:
			return 0, io.EOF
		}
		p.armTimer()
		p.ready.Wait()
	}
}

// Write appends b for the peer to read and wakes it; it never blocks. It
// fails with net.ErrClosed once c is closed, with io.ErrClosedPipe once the
// peer is, and with os.ErrDeadlineExceeded past the write deadline.
func (c *memConn) Write(b []byte) (int, error) {
	p := c.out
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.wclosed:
		return 0, net.ErrClosed
	case p.rclosed:
		return 0, io.ErrClosedPipe
	case past(p.wdeadline):
		return 0, os.ErrDeadlineExceeded
	}
	p.buf.Write(b)
	p.ready.Broadcast()
	return len(b), nil
}

// Close closes c: its own Read and Write fail from now on, and the peer
// reads io.EOF after what c wrote. Closing twice returns net.ErrClosed.
func (c *memConn) Close() error {
	c.in.mu.Lock()
	closed := c.in.rclosed
	c.in.rclosed = true
	c.in.buf = bytes.Buffer{}
	if c.in.timer != nil {
		c.in.timer.Stop()
	}
	c.in.ready.Broadcast()
	c.in.mu.Unlock()
	c.out.mu.Lock()
	c.out.wclosed = true
	c.out.ready.Broadcast()
	c.out.mu.Unlock()
	if closed {
		return net.ErrClosed
	}
	return nil
}

// SetDeadline sets both the read and the write deadline.
func (c *memConn) SetDeadline(t time.Time) error {
	_ = c.SetWriteDeadline(t)
	return c.SetReadDeadline(t)
}

// armTimer makes the timer wake the reader at the deadline, if there is
// one it is not set for yet. One timer serves every Read of the pipe, so
// the deadline go-redis sets before each reply costs no allocation.
// Call with p.mu held.
func (p *memPipe) armTimer() {
	switch {
	case p.rdeadline.IsZero() || p.rdeadline.Equal(p.timerAt):
	case p.timer == nil:
		p.timer = time.AfterFunc(time.Until(p.rdeadline), func() {
			p.mu.Lock()
			p.timerAt = time.Time{} // fired: arm again if Read still waits
			p.ready.Broadcast()
			p.mu.Unlock()
		})
	default:
		p.timer.Reset(time.Until(p.rdeadline))
	}
	p.timerAt = p.rdeadline
}

// SetReadDeadline sets when a Read stops waiting; the zero time means never.
// It wakes a blocked Read to look at the new deadline (and arm the timer).
func (c *memConn) SetReadDeadline(t time.Time) error {
	p := c.in
	p.mu.Lock()
	p.rdeadline = t
	p.ready.Broadcast()
	p.mu.Unlock()
	return nil
}

// SetWriteDeadline sets when Write starts to fail; the zero time means
// never. A Write never waits, so only a deadline already past matters.
func (c *memConn) SetWriteDeadline(t time.Time) error {
	c.out.mu.Lock()
	c.out.wdeadline = t
	c.out.mu.Unlock()
	return nil
}

// past reports whether deadline is set and has passed.
func past(deadline time.Time) bool {
	return !deadline.IsZero() && !time.Now().Before(deadline)
}

// LocalAddr is memAddr.
func (c *memConn) LocalAddr() net.Addr { return memAddr{} }

// RemoteAddr is memAddr.
func (c *memConn) RemoteAddr() net.Addr { return memAddr{} }
