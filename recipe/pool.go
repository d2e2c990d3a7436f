package recipe

import "sync"

// workers runs functions on a Session's long-lived goroutines, so that the
// per-request hand-offs of the acquire path (a request that must not block a
// caller whose context can end, the listing pipelined behind a create, the
// arming of a lease's own-node watch) start no goroutine and make no channel
// per request. A worker that finds no work parks on its own channel; run
// hands a function to a parked worker, or starts a new one when none is
// parked (so a burst of concurrent requests is never queued behind a slow
// one: the pool grows to the concurrency in flight).
//
// The bound: a worker exists only while it runs a function or is parked.
// Running workers are at most the requests in flight on behalf of callers
// at that moment (each blocked go-zookeeper call holds one; a request whose
// caller stopped waiting holds it until go-zookeeper answers or gives up
// the connection, at most the session timeout); at most maxIdleWorkers stay
// parked, the rest end after their function. stop (called by
// Session.Close after the connection is closed, so every request returns at
// once) ends the parked workers and waits until every worker has ended: no
// worker outlives Close. After stop, run calls the function on the calling
// goroutine (a request on a closed connection returns at once).
type workers struct {
	quit <-chan struct{} // closed before stop is called

	mu      sync.Mutex
	idle    []chan func()
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
		p.mu.Unlock()
		ch <- fn // buffered: never blocks
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go p.work(make(chan func(), 1), fn)
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
