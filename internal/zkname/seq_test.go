package zkname

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// parseSeqSlow is ParseSeq by its definition: the canonical %010d form,
// formatted back and compared.
func parseSeqSlow(s string) (int32, bool) {
	if len(s) != 10 && len(s) != 11 {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || string(AppendSeq(nil, int32(v))) != s {
		return 0, false
	}
	return int32(v), true
}

// TestParseSeqByDefinition: ParseSeq's fast path for ten digits agrees
// with the definition, on the edges and on random strings.
func TestParseSeqByDefinition(t *testing.T) {
	cases := []string{"0000000000", "0000000001", "2147483647", "2147483648", "9999999999", "-000000001",
		"-999999999", "-1000000000", "-2147483648", "-2147483649", "-000000000", "+000000001", "00000000a1",
		"000000000", "00000000000", " 000000001"}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789-+a "
	for range 200000 {
		b := make([]byte, 10+r.IntN(2))
		for i := range b {
			if r.IntN(10) == 0 {
				b[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[i] = byte('0' + r.IntN(10))
			}
		}
		cases = append(cases, string(b))
	}
	for range 100000 {
		cases = append(cases, string(AppendSeq(nil, int32(r.Uint32()))))
	}
	for _, s := range cases {
		v1, ok1 := ParseSeq(s)
		v2, ok2 := parseSeqSlow(s)
		if v1 != v2 || ok1 != ok2 {
			t.Fatalf("ParseSeq(%q) = %d, %v; by definition %d, %v", s, v1, ok1, v2, ok2)
		}
	}
}
