package fence_test

import (
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
)

// The 33/34 scenario: holder 33 pauses, loses its lease, holder 34 writes;
// when 33 resumes its write is refused.
func ExampleGuard() {
	var guard fence.Guard
	balance := 0
	set := func(v int) func() error { return func() error { balance = v; return nil } }

	fmt.Println(guard.Do("account", 33, set(100)))
	fmt.Println(guard.Do("account", 34, set(200)))
	err := guard.Do("account", 33, set(999)) // the paused holder resumes
	fmt.Println(errors.Is(err, fence.ErrStale), balance)
	// Output:
	// <nil>
	// <nil>
	// true 200
}

func ExampleParseToken() {
	t, err := fence.ParseToken("4294967301")
	fmt.Println(t, err)
	_, err = fence.ParseToken("0")
	fmt.Println(errors.Is(err, fence.ErrBadToken))
	// Output:
	// 4294967301 <nil>
	// true
}
