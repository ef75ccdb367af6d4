package storetest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/prchat/prchat/chat/chattest"
)

// Proxy is a TCP proxy in front of a database server that a test can cut,
// to see what prchat does while its database is unreachable without
// stopping a server that other tests share.
type Proxy struct {
	t      testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener // nil while cut
	conns map[net.Conn]struct{}
}

// NewProxy starts a proxy to target (host:port) on a loopback port, closed
// when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("storetest: proxy: %v", err)
	}
	p := &Proxy{t: t, target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(p.Cut)
	return p
}

// URL returns databaseURL with its host and port replaced by the proxy's.
func (p *Proxy) URL(databaseURL string) string {
	u, err := url.Parse(databaseURL)
	if err != nil {
		p.t.Fatalf("storetest: proxy: %v", err)
	}
	u.Host = p.addr
	return u.String()
}

// Cut closes every proxied connection and refuses new ones (connection
// refused) until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Restore accepts connections again, on the same port.
func (p *Proxy) Restore() {
	p.t.Helper()
	var ln net.Listener
	chattest.Eventually(p.t, "storetest: proxy: listening again on "+p.addr+" (the port was ours a moment ago)", func() bool {
		var err error
		ln, err = net.Listen("tcp", p.addr)
		return err == nil
	})
	p.serve(ln)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *Proxy) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut meanwhile
		p.mu.Unlock()
		_ = c.Close()
		_ = s.Close()
		return
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = s.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}
