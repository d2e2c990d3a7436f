package secrettest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// AbsentErr fails the test if err, or any error reachable from it through
// Unwrap() error and Unwrap() []error, holds Mark or any of parts: in its
// Error(), in its %v, %+v and %#v, or anywhere a struct walker (go-spew,
// go-cmp, a debugger, a panic reporter) reaches from it through fields,
// pointers, interfaces, slices and maps, unexported ones included. An error
// that keeps a password to scrub its message later holds it there even
// when every message is clean. Nothing found is printed; a nil err passes.
func AbsentErr(tb testing.TB, what string, err error, parts ...string) {
	tb.Helper()
	for i, e := range chain(err) {
		name := what
		if i > 0 {
			name = fmt.Sprintf("%s (wrapped error %d, %T)", what, i, e)
		}
		for _, f := range []struct{ verb, text string }{
			{"Error()", e.Error()},
			{"%v", fmt.Sprintf("%v", e)},
			{"%+v", fmt.Sprintf("%+v", e)},
			{"%#v", fmt.Sprintf("%#v", e)},
		} {
			if s := found(f.text, parts); s != "" {
				tb.Errorf("%s: its %s shows a password (%s found; text not printed)", name, f.verb, partName(s, parts))
				return
			}
		}
		w := walker{parts: parts, seen: map[uintptr]bool{}}
		if at := w.walk(reflect.ValueOf(e), fmt.Sprintf("%T", e), 0); at != "" {
			tb.Errorf("%s holds a password in a value a struct walker reaches: %s (value not printed)", name, at)
			return
		}
	}
}

// chain returns err and every error reachable from it by Unwrap, depth
// first, each once.
func chain(err error) []error {
	var out []error
	seen := map[error]bool{}
	var add func(error)
	add = func(e error) {
		if e == nil || comparable(e) && seen[e] {
			return
		}
		if comparable(e) {
			seen[e] = true
		}
		out = append(out, e)
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			add(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, w := range u.Unwrap() {
				add(w)
			}
		}
	}
	add(err)
	return out
}

func comparable(e error) bool { return reflect.TypeOf(e).Comparable() }

// found returns Mark or the first of parts that text holds, or "".
func found(text string, parts []string) string {
	for _, s := range append([]string{Mark}, parts...) {
		if strings.Contains(text, s) {
			return s
		}
	}
	return ""
}

// walker looks through a value for a string or byte slice holding a
// password, following pointers once each, to a bounded depth.
type walker struct {
	parts []string
	seen  map[uintptr]bool
}

// maxDepth bounds the walk: what an error holds sits a few levels down;
// deeper is a driver's connection state, reached through a cycle or not.
const maxDepth = 24

// walk returns the path to the first string in v that holds a password,
// or "".
func (w *walker) walk(v reflect.Value, path string, depth int) string {
	if !v.IsValid() || depth > maxDepth {
		return ""
	}
	switch v.Kind() {
	case reflect.String:
		if found(v.String(), w.parts) != "" {
			return path
		}
	case reflect.Pointer, reflect.Map:
		if v.IsNil() || w.seen[v.Pointer()] {
			return ""
		}
		w.seen[v.Pointer()] = true
		if v.Kind() == reflect.Pointer {
			return w.walk(v.Elem(), path, depth+1)
		}
		for it := v.MapRange(); it.Next(); {
			if at := w.walk(it.Key(), path+"[key]", depth+1); at != "" {
				return at
			}
			if at := w.walk(it.Value(), fmt.Sprintf("%s[%v]", path, safeKey(it.Key())), depth+1); at != "" {
				return at
			}
		}
	case reflect.Interface:
		return w.walk(v.Elem(), path, depth+1)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if at := w.walk(v.Field(i), path+"."+v.Type().Field(i).Name, depth+1); at != "" {
				return at
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if found(string(bytesOf(v)), w.parts) != "" { // an auth's bytes
				return path
			}
			return ""
		}
		for i := 0; i < v.Len(); i++ {
			if at := w.walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1); at != "" {
				return at
			}
		}
	}
	return ""
}

// bytesOf returns the bytes of a byte slice or array, exported or not.
func bytesOf(v reflect.Value) []byte {
	if v.Kind() == reflect.Slice {
		return v.Bytes()
	}
	b := make([]byte, v.Len())
	for i := range b {
		b[i] = byte(v.Index(i).Uint())
	}
	return b
}

// safeKey names a map key in a path without printing a string key (which
// could itself be what was found).
func safeKey(k reflect.Value) string {
	if k.Kind() == reflect.String {
		return "string key"
	}
	if k.CanInterface() {
		return fmt.Sprint(k.Interface())
	}
	return k.Kind().String()
}
