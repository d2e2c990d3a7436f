package fenceetcd_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fenceetcd"
)

// TestRegister: Write returns what it replaced and the revision of the
// write; equal and newer tokens are accepted, an older one refused with
// the stored token and nothing written; RaiseFloor keeps the data.
func TestRegister(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r, err := fenceetcd.NewRegister(e.cli, e.prefix+"/reg")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r.Read(ctx); err != nil || v.Token != 0 || v.Revision != 0 || v.Data != nil {
		t.Fatalf("missing register: %+v, %v", v, err)
	}
	var rev int64
	for _, c := range []struct {
		tok  fence.Token
		data string
		prev fence.Token
	}{{5, "a", 0}, {5, "", 5}, {6, "line1\nline2", 5}} {
		prev, rv, err := r.Write(ctx, c.tok, []byte(c.data))
		if err != nil || prev.Token != c.prev || rv <= rev {
			t.Fatalf("Write(%v) = %+v, %d, %v", c.tok, prev, rv, err)
		}
		rev = rv
	}
	v, err := r.Read(ctx)
	if err != nil || v.Token != 6 || string(v.Data) != "line1\nline2" || v.Revision != rev {
		t.Fatalf("Read = %+v, %v", v, err)
	}
	cur, _, err := r.Write(ctx, 4, []byte("late"))
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Highest != 6 || cur.Token != 6 {
		t.Fatalf("older token: %+v, %v", cur, err)
	}
	for _, c := range []struct {
		tok  fence.Token
		want error
	}{{0, fence.ErrNoToken}, {fence.MaxToken + 1, fence.ErrTokenOverflow}} {
		if _, _, err := r.Write(ctx, c.tok, nil); !errors.Is(err, c.want) {
			t.Errorf("Write(%v): %v, want %v", c.tok, err, c.want)
		}
	}
	floor := fence.Era(1).Floor()
	if got, err := r.RaiseFloor(ctx, floor); got != floor || err != nil {
		t.Fatalf("RaiseFloor = %v, %v", got, err)
	}
	if v, _ := r.Read(ctx); v.Token != floor || string(v.Data) != "line1\nline2" {
		t.Fatalf("after the floor: %+v", v)
	}
	if got, err := r.RaiseFloor(ctx, 9); got != floor || err != nil {
		t.Fatalf("a lower floor: %v, %v", got, err)
	}
	if _, err := r.RaiseFloor(ctx, fence.MaxToken+1); !errors.Is(err, fence.ErrTokenOverflow) {
		t.Fatalf("floor above MaxToken: %v", err)
	}
	if _, err := fenceetcd.NewRegister(e.cli, ""); !errors.Is(err, fenceetcd.ErrBadKey) {
		t.Fatalf("empty key: %v", err)
	}
	// Another program's value is reported, not overwritten.
	if _, err := e.cli.Put(ctx, e.prefix+"/other", "0x"); err != nil {
		t.Fatal(err)
	}
	o, _ := fenceetcd.NewRegister(e.cli, e.prefix+"/other")
	if _, err := o.Read(ctx); !errors.Is(err, fenceetcd.ErrNotFence) {
		t.Fatalf("Read of a foreign value: %v", err)
	}
	if _, err := o.RaiseFloor(ctx, 3); !errors.Is(err, fenceetcd.ErrNotFence) {
		t.Fatalf("RaiseFloor over a foreign value: %v", err)
	}
}
