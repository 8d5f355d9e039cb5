package subjects

// cacheLimit bounds a Cache; when full, a tenth of its entries are
// dropped, in no particular order.
const cacheLimit = 1024

// Cache keeps the recent Match results of one publisher, so that
// publishing to the same subjects again takes no lock. It is not safe for
// concurrent use: each publisher (a NATS connection's reader) has its own.
// The zero value is ready to use.
type Cache struct {
	generation uint64
	results    map[string]*Result
}

// Match returns r.Match(subject), from the cache while r's subscriptions
// have not changed since it was stored.
func (c *Cache) Match(r *Router, subject []byte) *Result {
	// Read before matching: a result computed now reflects at least
	// this generation, so storing it under it never hides a change.
	gen := r.Generation()
	switch {
	case c.results == nil:
		c.results = make(map[string]*Result)
		c.generation = gen
	case gen != c.generation:
		clear(c.results)
		c.generation = gen
	default:
		if res, ok := c.results[string(subject)]; ok {
			return res
		}
	}
	res := r.Match(subject)
	if len(c.results) >= cacheLimit {
		dropped := 0
		for k := range c.results {
			delete(c.results, k)
			if dropped++; dropped >= cacheLimit/10 {
				break
			}
		}
	}
	c.results[string(subject)] = res
	return res
}
