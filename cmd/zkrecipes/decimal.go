package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// decimalFlag is a flag of a whole number written in decimal digits only
// (--era, --semaphore). The flag package's IntVar and UintVar take Go's
// base prefixes, so that "010" was 8 and "0x10" 16: numbers every user of
// a lock must give alike would then differ by how they were written. A
// sign, a base prefix, an underscore or a leading zero is refused with an
// error saying so (the flag package names the flag; the status is 64).
type decimalFlag int

func (d *decimalFlag) String() string { return strconv.Itoa(int(*d)) }

func (d *decimalFlag) Set(s string) error {
	n, err := parseDecimal(s)
	if err != nil {
		return err
	}
	*d = decimalFlag(n)
	return nil
}

// parseDecimal parses s, the digits of a non-negative int in base 10
// ("0", "12"); anything else is an error for a user to read.
func parseDecimal(s string) (int, error) {
	if s == "" {
		return 0, errors.New("want a number in decimal digits")
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, errors.New("want a number in decimal digits 0-9 only (no sign, base prefix such as 0x, or underscore)")
		}
	}
	if len(s) > 1 && s[0] == '0' {
		// Versions before this read "010" as octal 8: refused rather than
		// read as 10, so that a leading zero never means two numbers.
		trimmed := strings.TrimLeft(s, "0")
		if trimmed == "" {
			return 0, errors.New("want a number in decimal digits without a leading zero: write 0")
		}
		if v, err := strconv.ParseInt(s, 8, 64); err == nil {
			return 0, fmt.Errorf("want a number in decimal digits without a leading zero (%q is ambiguous: %d to readers of octal; write %s)", s, v, trimmed)
		}
		return 0, fmt.Errorf("want a number in decimal digits without a leading zero: write %s", trimmed)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, errors.New("want a number in decimal digits: this one is too large")
	}
	return n, nil
}
