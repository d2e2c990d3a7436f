package zookeeper

import (
	"sync"
	"time"
)

// workers runs functions on a Session's long-lived goroutines, so that the
// hand-offs of the acquire path (a request a caller may stop waiting for,
// the listing pipelined behind a create, an own-node read) start no
// goroutine and make no channel per request: run hands a function to a
// parked worker, or starts one when none is parked (a burst never queues
// behind a slow request). Running workers are at most the requests in
// flight (one whose caller left holds its worker until go-zookeeper answers
// or drops the connection), at most maxIdleWorkers stay parked; stop (after
// the connection is closed) ends them and waits, and run then calls the
// function on the calling goroutine.
type workers struct {
	quit <-chan struct{} // closed before stop is called

	mu      sync.Mutex
	idle    []chan func()
	busy    int // functions handed over and not returned
	stopped bool
	wg      sync.WaitGroup // live workers; Add only under mu while !stopped
}

const maxIdleWorkers = 64

func (p *workers) run(fn func()) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		fn()
		return
	}
	if n := len(p.idle); n > 0 {
		ch := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.busy++
		p.mu.Unlock()
		ch <- fn // buffered: never blocks
		return
	}
	p.wg.Add(1)
	p.busy++
	p.mu.Unlock()
	go p.work(make(chan func(), 1), fn)
}

// settle waits until no function runs, or for d at most. Session.Close
// calls it before it closes go-zookeeper's connection: a request whose
// reply is being decoded when go-zookeeper's Close is called returns at
// once, and go-zookeeper's own method then reads the reply's struct while
// the decode writes it (a data race in go-zookeeper v1.0.4's request,
// which its comment there admits).
func (p *workers) settle(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		p.mu.Lock()
		busy := p.busy
		p.mu.Unlock()
		if busy == 0 {
			return
		}
	}
}

// stop ends the pool: see workers. quit must be closed first.
func (p *workers) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *workers) work(ch chan func(), fn func()) {
	defer p.wg.Done()
	for {
		fn()
		p.mu.Lock()
		p.busy--
		select {
		case <-p.quit:
			p.mu.Unlock()
			return
		default:
		}
		if len(p.idle) >= maxIdleWorkers {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, ch)
		p.mu.Unlock()
		select {
		case fn = <-ch:
		case <-p.quit:
			// run may have taken ch from idle just before quit: a function
			// handed over is still run (it finds the Session closed).
			p.mu.Lock()
			taken := true
			for i, c := range p.idle {
				if c == ch {
					p.idle = append(p.idle[:i], p.idle[i+1:]...)
					taken = false
					break
				}
			}
			p.mu.Unlock()
			if !taken {
				return
			}
			fn = <-ch // run took ch from idle: its send is coming
		}
	}
}
