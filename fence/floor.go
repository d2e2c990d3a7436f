package fence

// RaiseFloor makes floor the lowest token resource accepts from now on: its
// highest accepted token becomes max(highest, floor), atomically with every
// Do on resource, so a later write with a token below floor is refused
// with a [*StaleError]. It returns the mark now in effect, never lowers
// it, and changes nothing for a zero floor; a floor above MaxFloor is
// refused with a [*RangeError] (ErrTokenOverflow), as by every fence
// ([CheckFloor]). It is the operator's step of a switch of lock backend:
// raise every fence to the new era's Floor (see Eras in the package
// documentation).
func (g *Guard) RaiseFloor(resource string, floor Token) (Token, error) {
	if err := CheckFloor(floor); err != nil {
		return 0, err
	}
	e := g.entry(resource)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.high = max(e.high, floor)
	return e.high, nil
}
