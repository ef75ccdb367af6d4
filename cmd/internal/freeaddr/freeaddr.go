// Package freeaddr hands out free TCP addresses on 127.0.0.1 for processes
// that bind them later: the daemons the bench starts, the chaos suite's
// servers and the containers of the compose boot test.
//
// An address is free when the kernel gives it to a listener that is then
// closed at once, but the process meant for it binds it only when it has
// started; meanwhile the kernel may give the same port to the next caller
// (as it did to two containers of the compose boot test). A Book
// therefore never hands out an address twice, even once its process is
// gone: a process restarted listens on its own address again.
package freeaddr

import (
	"errors"
	"fmt"
	"net"
	"sync"
)

// A Book hands out free addresses, each once. Its zero value is ready.
type Book struct {
	mu    sync.Mutex
	given map[string]bool
	// pick finds a free address; nil: Listen.
	pick func() (string, error)
}

// Next returns a free address, host:port, that b has not handed out.
func (b *Book) Next() (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pick := b.pick
	if pick == nil {
		pick = Listen
	}
	if b.given == nil {
		b.given = map[string]bool{}
	}
	for range 100 {
		addr, err := pick()
		if err != nil {
			return "", err
		}
		if !b.given[addr] {
			b.given[addr] = true
			return addr, nil
		}
	}
	return "", errors.New("find a free port: the kernel gave only ports handed out already")
}

// Listen returns the address of a listener on 127.0.0.1 that it closed:
// free a moment ago, and handed out by nobody but the kernel.
func Listen() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
