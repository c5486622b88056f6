package reqindex

// SetInLookup makes every lookup of x run f inside its read transaction
// of the file (tests: a lookup held in the middle).
func SetInLookup(x *Index, f func()) { x.inLookup = f }
