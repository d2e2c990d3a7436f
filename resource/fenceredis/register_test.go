package fenceredis_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fenceredis"
)

// TestRegister: Write returns what it replaced (the version counts the
// writes); equal and newer tokens are accepted, an older one refused with
// the stored token and nothing written; RaiseFloor keeps the data.
func TestRegister(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r, err := fenceredis.NewRegister(e.cli, e.prefix+"reg")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r.Read(ctx); err != nil || v.Token != 0 || v.Version != 0 || v.Data != nil {
		t.Fatalf("missing register: %+v, %v", v, err)
	}
	for i, c := range []struct {
		tok  fence.Token
		data string
		prev fence.Token
	}{{5, "a", 0}, {5, "", 5}, {6, "line1\nline2", 5}} {
		prev, err := r.Write(ctx, c.tok, []byte(c.data))
		if err != nil || prev.Token != c.prev || prev.Version != int64(i) {
			t.Fatalf("Write(%v) = %+v, %v", c.tok, prev, err)
		}
	}
	v, err := r.Read(ctx)
	if err != nil || v.Token != 6 || string(v.Data) != "line1\nline2" || v.Version != 3 {
		t.Fatalf("Read = %+v, %v", v, err)
	}
	cur, err := r.Write(ctx, 4, []byte("late"))
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Highest != 6 || cur.Token != 6 || cur.Version != 3 {
		t.Fatalf("older token: %+v, %v", cur, err)
	}
	for _, c := range []struct {
		tok  fence.Token
		want error
	}{{0, fence.ErrNoToken}, {fence.MaxToken + 1, fence.ErrTokenOverflow}} {
		if _, err := r.Write(ctx, c.tok, nil); !errors.Is(err, c.want) {
			t.Errorf("Write(%v): %v, want %v", c.tok, err, c.want)
		}
	}
	floor := fence.Era(1).Floor()
	if got, err := r.RaiseFloor(ctx, floor); got != floor || err != nil {
		t.Fatalf("RaiseFloor = %v, %v", got, err)
	}
	if v, _ := r.Read(ctx); v.Token != floor || string(v.Data) != "line1\nline2" || v.Version != 4 {
		t.Fatalf("after the floor: %+v", v)
	}
	for _, fl := range []fence.Token{floor, 9, 0} {
		if got, err := r.RaiseFloor(ctx, fl); got != floor || err != nil {
			t.Fatalf("floor %v: %v, %v", fl, got, err)
		}
	}
	if v, _ := r.Read(ctx); v.Version != 4 {
		t.Fatalf("a floor that changed nothing counted a version: %+v", v)
	}
	if _, err := r.RaiseFloor(ctx, fence.MaxToken+1); !errors.Is(err, fence.ErrTokenOverflow) {
		t.Fatalf("floor above MaxToken: %v", err)
	}
	if _, err := fenceredis.NewRegister(e.cli, ""); !errors.Is(err, fenceredis.ErrBadKey) {
		t.Fatalf("empty key: %v", err)
	}
	// Another program's key is reported, not overwritten.
	e.cli.Set(ctx, e.prefix+"str", "x", 0)
	e.cli.HSet(ctx, e.prefix+"hash", "token", "01")
	for _, k := range []string{"str", "hash"} {
		o, _ := fenceredis.NewRegister(e.cli, e.prefix+k)
		if _, err := o.Read(ctx); !errors.Is(err, fenceredis.ErrNotFence) {
			t.Errorf("Read of %s: %v", k, err)
		}
		if _, err := o.Write(ctx, 3, []byte("v")); !errors.Is(err, fenceredis.ErrNotFence) {
			t.Errorf("Write over %s: %v", k, err)
		}
	}
	if e.get(t, e.prefix+"str") != "x" {
		t.Fatal("the foreign string was overwritten")
	}
}
