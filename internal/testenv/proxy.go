package testenv

import (
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections to a target address until it is stopped, so that
// a test can make an API server unreachable and reachable again at the same
// address. Stop closes every open connection, as a broken network would. With
// several targets it spreads connections over them in turn, passing over one
// that refuses, as a Service in front of replicas does.
type Proxy struct {
	targets []string
	next    int
	addr    string

	mu       sync.Mutex
	listener net.Listener
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// StartProxy listens on a free local port and forwards to the targets (host:port).
func StartProxy(targets ...string) (*Proxy, error) {
	p := &Proxy{targets: targets, addr: "127.0.0.1:0", conns: map[net.Conn]struct{}{}}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// Addr is the proxy's address (host:port); it stays the same across Stop and Start.
func (p *Proxy) Addr() string { return p.addr }

// Start listens again after Stop.
func (p *Proxy) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener != nil {
		return nil
	}
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.listener, p.addr = l, l.Addr().String()
	p.wg.Add(1)
	go p.accept(l)
	return nil
}

// Stop closes the listener and every connection through the proxy.
func (p *Proxy) Stop() {
	p.mu.Lock()
	if p.listener != nil {
		_ = p.listener.Close()
		p.listener = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept(l net.Listener) {
	defer p.wg.Done()
	for {
		in, err := l.Accept()
		if err != nil {
			return // Closed by Stop.
		}
		out, err := p.dial()
		if err != nil {
			_ = in.Close()
			continue
		}
		if !p.track(in, out) {
			return
		}
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// dial connects to the next target that accepts.
func (p *Proxy) dial() (net.Conn, error) {
	var err error
	for range p.targets {
		p.mu.Lock()
		target := p.targets[p.next%len(p.targets)]
		p.next++
		p.mu.Unlock()
		var out net.Conn
		if out, err = net.Dial("tcp", target); err == nil {
			return out, nil
		}
	}
	return nil, err
}

// track remembers a pair of connections; false when the proxy is stopping.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener == nil {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	// Either side closing (or Stop) ends both directions.
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
