package fencehttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencehttp"
)

// A fenced HTTP service keeps a report; holders of a lock (memlock here,
// any recipe.Lock in production) write it through fencehttp.Transport. A
// holder whose lease ended while it was paused is refused with 409, and
// its client gets a *fence.StaleError.
func Example() {
	// The service: PUT /reports/{name}, fenced per report by a Guard.
	var (
		guard   fence.Guard
		mu      sync.Mutex
		reports = map[string]string{}
	)
	write := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		reports[r.PathValue("name")] = string(body)
		mu.Unlock()
		fmt.Fprintln(w, "stored")
	})
	report := func(r *http.Request) string { return "report-" + r.PathValue("name") }
	mux := http.NewServeMux()
	mux.Handle("PUT /reports/{name}", fencehttp.Handler(&guard, report, write))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// Two holders of the lock "nightly".
	locks, _ := memlock.NewServer(memlock.WithTTL(200 * time.Millisecond))
	defer locks.Close()
	a, b := locks.Connect(), locks.Connect()
	defer a.Close()
	defer b.Close()
	ma, _ := memlock.New(a, "nightly")
	mb, _ := memlock.New(b, "nightly")
	ctx := context.Background()
	put := func(client *http.Client, prepare func(*http.Request), body string) error {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/reports/nightly", strings.NewReader(body))
		if prepare != nil {
			prepare(req)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return fencehttp.CheckResponse(resp)
	}

	la, _ := ma.Acquire(ctx)
	a.CutOff() // A's process pauses: its session stops talking, its lease ends
	<-la.Context().Done()

	lb, _ := mb.Acquire(ctx) // granted once the lock service expired A
	defer lb.Release(ctx)
	clientB := &http.Client{Transport: &fencehttp.Transport{Base: srv.Client().Transport, Lease: lb}}
	fmt.Println("B:", put(clientB, nil, "totals by B"))

	// A resumes in the middle of a write whose lease check it had passed
	// before the pause: its request goes out with its old token.
	err := put(srv.Client(), func(r *http.Request) { fencehttp.SetToken(r, la.Token()) }, "totals by A")
	var stale *fence.StaleError
	fmt.Println("A refused:", errors.As(err, &stale), stale.Highest == lb.Token())
	// Through its Transport, A's next request is not even sent.
	clientA := &http.Client{Transport: &fencehttp.Transport{Base: srv.Client().Transport, Lease: la}}
	fmt.Println("A again:", errors.Is(put(clientA, nil, "totals by A"), fencehttp.ErrLeaseEnded))
	mu.Lock()
	fmt.Println("report:", reports["nightly"])
	mu.Unlock()
	// Output:
	// B: <nil>
	// A refused: true true
	// A again: true
	// report: totals by B
}
