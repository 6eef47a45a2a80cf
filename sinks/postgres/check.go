package postgres

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/replay-tool/replay/internal/jsonscan"
	"github.com/replay-tool/replay/internal/record"
)

// The checks that keep a value from being changed on its way into a
// column (varchar(n) cuts, numeric(p,s), float and timestamp(p) round):
// each returns the reason, naming the column, which the sink makes a
// *record.Error. PostgreSQL rejects what other types cannot convert.

// check returns why text value s would not be stored as it is in c.
func (c *pgColumn) check(s string) error {
	mod := c.decl.typmod
	switch c.decl.base {
	case "varchar", "bpchar":
		if mod < 4 {
			return nil
		}
		if n, max := utf8.RuneCountInString(s), int(mod-4); n > max {
			return fmt.Errorf("column %s (%s): the %s has %d characters, more than %d; it would be cut: widen the column or map another field", c.name, c.decl.sql, fieldName(c.field), n, max)
		}
	case "int2", "int4", "int8":
		bits := 8 * int(c.decl.base[3]-'0') // int2, int4, int8: that many bytes
		if _, err := strconv.ParseInt(strings.TrimSpace(s), 10, bits); err != nil {
			why := "is not an integer"
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				why = fmt.Sprintf("is out of the range of %s", c.decl.sql)
			}
			return fmt.Errorf("column %s (%s): the %s %q %s", c.name, c.decl.sql, fieldName(c.field), excerpt(s), why)
		}
	case "numeric":
		if mod < 4 {
			return nil
		}
		prec, scale := int((mod-4)>>16&0xffff), int(int16((mod-4)&0xffff))
		intDigits, fracDigits, ok := decimalDigits(s)
		if !ok {
			return nil // not a plain number: PostgreSQL decides (NaN, Infinity, or an error)
		}
		if fracDigits > scale {
			return fmt.Errorf("column %s (%s): the %s %s has %d decimals, more than %d; it would be rounded", c.name, c.decl.sql, fieldName(c.field), excerpt(s), fracDigits, scale)
		}
		if intDigits > prec-scale {
			return fmt.Errorf("column %s (%s): the %s %s has %d digits before the point, more than %d; it would overflow", c.name, c.decl.sql, fieldName(c.field), excerpt(s), intDigits, prec-scale)
		}
	case "float4", "float8":
		bits := 64
		if c.decl.base == "float4" {
			bits = 32
		}
		t := strings.TrimSpace(s)
		if _, ok := new(big.Rat).SetString(t); !ok {
			return nil // NaN, Infinity or not a number: PostgreSQL decides
		}
		f, err := strconv.ParseFloat(t, bits)
		if err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("column %s (%s): the %s %s is out of its range", c.name, c.decl.sql, fieldName(c.field), excerpt(s))
		}
		if !jsonscan.FloatHolds(t, f, bits) {
			return fmt.Errorf("column %s (%s): the %s %s would be rounded to %s; use numeric", c.name, c.decl.sql, fieldName(c.field), excerpt(s), strconv.FormatFloat(f, 'g', -1, bits))
		}
	case "timestamp", "timestamptz", "time", "timetz":
		p := 6 // PostgreSQL keeps microseconds
		if mod >= 0 {
			p = min(int(mod), 6)
		}
		if n := fracSecondDigits(s); n > p {
			return fmt.Errorf("column %s (%s): the %s %s has more than %d decimals of a second; it would be rounded", c.name, c.decl.sql, fieldName(c.field), excerpt(s), p)
		}
	}
	return nil
}

// fracSecondDigits returns the significant digits of the fraction of a
// second in timestamp text s (after "hh:mm:ss."; trailing zeros do not
// count), 0 when it has none.
func fracSecondDigits(s string) int {
	for i := 3; i < len(s); i++ {
		if s[i] != '.' || s[i-3] != ':' || !isDigit(s[i-2]) || !isDigit(s[i-1]) {
			continue
		}
		j := i + 1
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		return len(strings.TrimRight(s[i+1:j], "0"))
	}
	return 0
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// checkTime returns why t would be rounded in c (timestamp(p) with p < 3:
// a record's timestamp has milliseconds).
func (c *pgColumn) checkTime(t time.Time) error {
	if c.decl.base != "timestamptz" && c.decl.base != "timestamp" || c.decl.typmod < 0 {
		return nil
	}
	p := int(c.decl.typmod)
	unit := time.Duration(math.Pow10(9 - min(p, 6)))
	if t.Sub(t.Truncate(time.Second))%unit != 0 {
		return fmt.Errorf("column %s (%s): the timestamp %s has more than %d decimals of a second; it would be rounded", c.name, c.decl.sql, t.UTC().Format(time.RFC3339Nano), p)
	}
	return nil
}

// decimalDigits returns the significant digits of decimal number s before
// and after the point (leading zeros of the integer part and trailing
// zeros of the fraction do not count), after its exponent is applied.
func decimalDigits(s string) (intDigits, fracDigits int, ok bool) {
	s = strings.TrimSpace(s)
	s = strings.TrimLeft(s, "+-")
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return 0, 0, false
		}
		mant, exp = s[:i], e
	}
	ip, fp, _ := strings.Cut(mant, ".")
	if ip == "" && fp == "" || strings.Trim(ip+fp, "0123456789") != "" {
		return 0, 0, false
	}
	digits := strings.TrimLeft(ip+fp, "0")
	point := len(ip) - (len(ip+fp) - len(digits)) + exp // digits before the point
	digits = strings.TrimRight(digits, "0")
	if digits == "" {
		return 0, 0, true
	}
	return max(point, 0), max(len(digits)-point, 0), true
}

// excerpt bounds a value quoted in a message (record.Excerpt).
func excerpt(s string) string { return record.Excerpt(s, 40) }
