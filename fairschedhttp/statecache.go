package fairschedhttp

import (
	"sync"
	"time"
)

// refreshEvery is how often the page refreshes itself (admin.js polls
// again this long after each answer), and so how long viewers share one
// state.
const refreshEvery = 2 * time.Second

// adminNow is the admin handlers' clock; tests set it.
var adminNow = time.Now

// stateCache keeps the state of each page of the queue asked for, built
// at most once per ttl, so that however many viewers poll, the scheduler's
// lock is taken once per page and interval. A viewer that finds a page's
// state stale builds it while the others wait for it, and share it.
type stateCache struct {
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	pages map[int]cachedState
}

type cachedState struct {
	built time.Time
	st    State
}

// maxCachedPages bounds the pages kept: a client asking for many pages
// within an interval makes its own states, not a growing map.
const maxCachedPages = 64

func newStateCache(ttl time.Duration, now func() time.Time) *stateCache {
	return &stateCache{ttl: ttl, now: now, pages: map[int]cachedState{}}
}

// get returns page's state, built by build if it is not kept or older
// than the ttl. The caller may change the copy it gets.
func (c *stateCache) get(page int, build func(page int) State) State {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if e, ok := c.pages[page]; ok && now.Sub(e.built) < c.ttl {
		return e.st
	}
	if len(c.pages) >= maxCachedPages {
		for p, e := range c.pages {
			if now.Sub(e.built) >= c.ttl {
				delete(c.pages, p)
			}
		}
		if len(c.pages) >= maxCachedPages {
			clear(c.pages)
		}
	}
	st := build(page)
	c.pages[page] = cachedState{now, st}
	return st
}

// reset forgets every state kept, after a change to the scheduler.
func (c *stateCache) reset() {
	c.mu.Lock()
	clear(c.pages)
	c.mu.Unlock()
}
