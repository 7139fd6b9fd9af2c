package rt

import (
	"context"
	"sync"
	"time"
)

// jobContext is the context a job's function receives. It ends when its
// parent does (the RunSync caller's context), when the job is cancelled or
// the scheduler closed, and when the function returns. With valuesOnly
// (a Submit job's), it takes its parent's values and nothing else: not
// its end, nor its deadline. It allocates nothing until Done or AfterFunc
// is first called.
//
// It has an AfterFunc method, which the context package uses when it
// derives a context from it (WithCancel, WithTimeout): without one, each
// derived context would start a goroutine to watch this one's Done.
//
// It is 64 bytes, a size class of the allocator: what only some contexts
// need is in watch, made when first needed.
type jobContext struct {
	parent     context.Context
	valuesOnly bool
	attempt    int32 // the job's attempt it is for; 0 means the first

	mu    sync.Mutex
	done  chan struct{}
	err   error
	watch *jobWatch // nil until Done or AfterFunc
}

// jobWatch is what a jobContext keeps once something watches it.
type jobWatch struct {
	stopParent func() bool  // stops watching the parent; nil while not watching
	afters     []*afterFunc // to run when it ends
}

// afterFunc is a function registered with jobContext.AfterFunc.
type afterFunc struct{ f func() }

// watchLocked returns the context's jobWatch, making it.
func (c *jobContext) watchLocked() *jobWatch {
	if c.watch == nil {
		c.watch = new(jobWatch)
	}
	return c.watch
}

func (c *jobContext) Deadline() (time.Time, bool) {
	if c.valuesOnly {
		return time.Time{}, false
	}
	return c.parent.Deadline()
}
func (c *jobContext) Value(key any) any {
	switch key {
	case attemptKey{}:
		return int(max(c.attempt, 1))
	case parentKey{}:
		return c
	}
	return c.parent.Value(key)
}

func (c *jobContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if err := c.parentErr(); c.err == nil && err != nil {
			c.err = err
		}
		if c.err != nil {
			c.done = closedChan
			return c.done
		}
		c.done = make(chan struct{})
		c.watchParentLocked()
	}
	return c.done
}

// parentErr returns the parent's error, if its end is this context's.
func (c *jobContext) parentErr() error {
	if c.valuesOnly {
		return nil
	}
	return c.parent.Err()
}

// watchParentLocked makes the context end when its parent does, once.
func (c *jobContext) watchParentLocked() {
	if c.valuesOnly || c.parent.Done() == nil || c.watch != nil && c.watch.stopParent != nil {
		return
	}
	parent := c.parent
	c.watchLocked().stopParent = context.AfterFunc(parent, func() { c.cancel(parent.Err()) })
}

// AfterFunc arranges for f to run on a goroutine of its own once the
// context is done, as context.AfterFunc does, and returns a function that
// cancels that and reports whether it did so before f started.
func (c *jobContext) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.parentErr(); c.err == nil && err != nil {
		c.cancelLocked(err)
	}
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	c.watchParentLocked()
	w := c.watchLocked()
	a := &afterFunc{f: f}
	w.afters = append(w.afters, a)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, b := range w.afters {
			if b == a {
				w.afters = append(w.afters[:i], w.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}

func (c *jobContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		if err := c.parentErr(); err != nil {
			c.cancelLocked(err)
		}
	}
	return c.err
}

func (c *jobContext) cancel(err error) {
	c.mu.Lock()
	c.cancelLocked(err)
	c.mu.Unlock()
}

func (c *jobContext) cancelLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil && c.done != closedChan {
		close(c.done)
	}
	if c.watch != nil {
		for _, a := range c.watch.afters {
			go a.f()
		}
		c.watch.afters = nil
	}
}

// end cancels the context once the function returned, as net/http does
// with a request's, and detaches it from its parent.
func (c *jobContext) end() {
	c.mu.Lock()
	if c.watch != nil && c.watch.stopParent != nil {
		c.watch.stopParent()
		c.watch.stopParent = nil
	}
	c.cancelLocked(context.Canceled)
	c.mu.Unlock()
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// parentKey is the context key under which a job's context answers with
// itself, so that a child finds its parent.
type parentKey struct{}

// attemptKey is the context key of a job's attempt number.
type attemptKey struct{}
