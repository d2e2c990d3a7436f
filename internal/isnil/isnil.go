// Package isnil tells an interface value holding a nil pointer (a typed
// nil, such as a `var m *redislock.Mutex` passed as a recipe.Lock) from a
// real one: `v == nil` is false for it, and calling a method on it panics
// deep inside the backend instead of returning recipe.ErrBadOption.
package isnil

import "reflect"

// Is reports whether v is nil or holds a nil pointer, map, slice, channel,
// function or interface.
func Is(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface, reflect.UnsafePointer:
		return r.IsNil()
	}
	return false
}
