package main

import (
	"io"
	"net"
	"sync"
	"testing"
)

// tcpProxy forwards TCP connections from Listen to an upstream address;
// Stop cuts it (the listener and every connection through it), as a
// network between the app and its database fails, and Start brings it
// back on the same address.
type tcpProxy struct {
	Listen   string
	upstream string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

// startProxy starts a TCP proxy to upstream on a free port, stopped when
// the test ends.
func startProxy(t *testing.T, upstream string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{Listen: "127.0.0.1:0", upstream: upstream, conns: map[net.Conn]bool{}}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// Start listens on Listen (a free port the first time, then the same one).
func (p *tcpProxy) Start() error {
	ln, err := net.Listen("tcp", p.Listen)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ln, p.Listen = ln, ln.Addr().String()
	p.mu.Unlock()
	go p.accept(ln)
	return nil
}

func (p *tcpProxy) accept(ln net.Listener) {
	for {
		down, err := ln.Accept()
		if err != nil {
			return // stopped
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			down.Close()
			continue
		}
		if !p.track(ln, down, up) {
			return
		}
		go p.pipe(down, up)
		go p.pipe(up, down)
	}
}

// track records a link's two connections, unless the proxy was stopped
// (or restarted) since ln accepted it: then it closes them.
func (p *tcpProxy) track(ln net.Listener, down, up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != ln {
		down.Close()
		up.Close()
		return false
	}
	p.conns[down], p.conns[up] = true, true
	return true
}

// pipe copies one direction of a link; when either side ends, so do both.
func (p *tcpProxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	p.mu.Lock()
	defer p.mu.Unlock()
	dst.Close()
	src.Close()
	delete(p.conns, dst)
	delete(p.conns, src)
}

// Stop closes the listener and every connection through the proxy.
func (p *tcpProxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}
