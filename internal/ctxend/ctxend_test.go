package ctxend

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEnded(t *testing.T) {
	if Ended(context.Background()) {
		t.Fatal("Background ended")
	}
	live, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if Ended(live) {
		t.Fatal("a ctx with an hour left ended")
	}
	cause := errors.New("stopped")
	stopped, stop := context.WithCancelCause(context.Background())
	stop(cause)
	if !Ended(stopped) || Cause(stopped) != cause {
		t.Fatalf("cancelled ctx: Ended %v, Cause %v", Ended(stopped), Cause(stopped))
	}
	short, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	time.Sleep(20 * time.Millisecond)
	if !Ended(short) || !errors.Is(Cause(short), context.DeadlineExceeded) {
		t.Fatalf("passed deadline: Ended %v, Cause %v", Ended(short), Cause(short))
	}
}
