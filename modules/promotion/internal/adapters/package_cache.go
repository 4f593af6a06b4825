package adapters

import (
	"sync"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
)

// maxCachedPackages bounds the cache; packages are an admin's catalogue, a
// handful, so reaching it means something unusual and the cache starts over.
const maxCachedPackages = 1024

// packageCache remembers the active packages purchases were built from, so
// that a purchase can be built before its transaction reads anything. An
// entry is only a guess: PurchaseRepository.insert writes nothing unless
// the package row, share-locked by that statement, still equals the entry,
// and a miss falls back to reading the package (ADR-0004, "The package of a purchase").
// So it needs no expiry: an edit or a deactivation costs the next purchase
// one extra statement, never a stale snapshot.
type packageCache struct {
	mu       sync.RWMutex
	packages map[uuid.UUID]*domain.Package
}

func (c *packageCache) get(id uuid.UUID) *domain.Package {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.packages[id]
}

// put remembers p if it is active; an inactive package admits no purchase,
// so guessing it would save nothing.
func (c *packageCache) put(p *domain.Package) {
	if p == nil || !p.IsActive() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.packages == nil || len(c.packages) >= maxCachedPackages {
		c.packages = make(map[uuid.UUID]*domain.Package)
	}
	c.packages[p.ID()] = p
}

func (c *packageCache) forget(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.packages, id)
}
