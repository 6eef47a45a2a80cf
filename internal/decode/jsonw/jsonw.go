// Package jsonw appends the JSON renderings the decoders share: strings,
// floats (NaN and the infinities as strings), decimals with their scale,
// timestamps, dates, times of day and base64 bytes. Every function appends
// to b and returns the extended slice, as strconv.Append* do.
package jsonw

import (
	"encoding/base64"
	"math"
	"math/big"
	"strconv"
	"time"
	"unsafe"

	"github.com/replay-tool/replay/internal/jsonscan"
)

// String appends s as a JSON string, escaping as encoding/json does
// without its HTML escaping (", \, control characters, U+2028, U+2029).
// Invalid UTF-8 becomes U+FFFD; the decoders check UTF-8 before they call
// it where a change would be silent. It reads s in place
// (jsonscan.AppendString), without a copy.
func String(b []byte, s string) []byte {
	return jsonscan.AppendString(b, unsafe.Slice(unsafe.StringData(s), len(s)))
}

// Float appends f as a JSON number with the fewest digits that read back
// as the same value at bits (32 or 64) precision, in the form
// encoding/json uses (exponent below 1e-6 and from 1e21). NaN, +Inf and
// -Inf, which JSON numbers cannot hold, are the strings "NaN", "Infinity"
// and "-Infinity".
func Float(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// Decimal appends the decimal unscaled × 10^-scale as a JSON number with
// exactly scale fraction digits (unscaled 1230, scale 2: 12.30); scale 0
// gives an integer. scale must not be negative.
func Decimal(b []byte, unscaled *big.Int, scale int) []byte {
	var buf [64]byte
	return decimalDigits(b, unscaled.Append(buf[:0], 10), scale)
}

// DecimalInt64 is Decimal of an unscaled value that fits an int64.
func DecimalInt64(b []byte, unscaled int64, scale int) []byte {
	var buf [24]byte
	return decimalDigits(b, strconv.AppendInt(buf[:0], unscaled, 10), scale)
}

// decimalDigits appends digits (decimal, with a leading '-' when
// negative) with a point before the last scale of them.
func decimalDigits(b, digits []byte, scale int) []byte {
	if digits[0] == '-' {
		b = append(b, '-')
		digits = digits[1:]
	}
	if scale == 0 {
		return append(b, digits...)
	}
	if len(digits) <= scale {
		b = append(b, '0', '.')
		for range scale - len(digits) {
			b = append(b, '0')
		}
		return append(b, digits...)
	}
	cut := len(digits) - scale
	b = append(b, digits[:cut]...)
	b = append(b, '.')
	return append(b, digits[cut:]...)
}

// Timestamp appends t in UTC as an RFC 3339 JSON string with digits (0, 3,
// 6 or 9) fraction digits, ending in Z when zone is true and with no zone
// otherwise (a local timestamp). Years outside 0000-9999 are written with
// as many digits as they need, and a minus sign before year 0 (ISO 8601's
// expanded years): the value is never clamped.
func Timestamp(b []byte, t time.Time, digits int, zone bool) []byte {
	t = t.UTC()
	b = append(b, '"')
	b = appendDate(b, t)
	h, m, s := t.Clock()
	b = append(b, 'T')
	b = appendClock(b, h, m, s, t.Nanosecond(), digits)
	if zone {
		b = append(b, 'Z')
	}
	return append(b, '"')
}

// Date appends the calendar day of t (in UTC) as the JSON string
// "YYYY-MM-DD".
func Date(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = appendDate(b, t.UTC())
	return append(b, '"')
}

// TimeOfDay appends nanos, nanoseconds since midnight within one day, as
// the JSON string "HH:MM:SS" with digits fraction digits.
func TimeOfDay(b []byte, nanos int64, digits int) []byte {
	s := nanos / 1e9
	b = append(b, '"')
	b = appendClock(b, int(s/3600), int(s/60%60), int(s%60), int(nanos%1e9), digits)
	return append(b, '"')
}

// Base64 appends v as a JSON string holding its standard base64 encoding
// (with padding).
func Base64(b, v []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

func appendDate(b []byte, t time.Time) []byte {
	year, month, day := t.Date()
	if year < 0 {
		b = append(b, '-')
		year = -year
	}
	b = pad(b, year, 4)
	b = append(b, '-')
	b = pad(b, int(month), 2)
	b = append(b, '-')
	return pad(b, day, 2)
}

func appendClock(b []byte, h, m, s, nanos, digits int) []byte {
	b = pad(b, h, 2)
	b = append(b, ':')
	b = pad(b, m, 2)
	b = append(b, ':')
	b = pad(b, s, 2)
	if digits > 0 {
		var buf [10]byte
		buf[0] = '.'
		frac := nanos
		for range 9 - digits {
			frac /= 10
		}
		for i := digits; i > 0; i-- {
			buf[i] = byte('0' + frac%10)
			frac /= 10
		}
		b = append(b, buf[:1+digits]...)
	}
	return b
}

// pad appends the non-negative n in decimal, left-padded with zeros to
// width digits.
func pad(b []byte, n, width int) []byte {
	if width == 2 && n >= 0 && n < 100 {
		return append(b, byte('0'+n/10), byte('0'+n%10))
	}
	var buf [20]byte
	s := strconv.AppendInt(buf[:0], int64(n), 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// maxFastUnix is 10000-01-01T00:00:00Z in Unix seconds: below it (and from
// the epoch) TimestampUnix writes the digits without a time.Time.
const maxFastUnix = 253402300800

// TimestampUnix is Timestamp of the instant sec seconds and nsec
// nanoseconds (0 to 999999999) after the Unix epoch.
func TimestampUnix(b []byte, sec, nsec int64, digits int, zone bool) []byte {
	if sec < 0 || sec >= maxFastUnix {
		return Timestamp(b, time.Unix(sec, nsec), digits, zone)
	}
	days, rem := uint64(sec)/86400, uint64(sec)%86400
	year, month, day := civil(days)
	h, m, s := rem/3600, rem/60%60, rem%60
	// "YYYY-MM-DDTHH:MM:SS.fffffffffZ"
	t := [32]byte{'"', byte('0' + year/1000), byte('0' + year/100%10), byte('0' + year/10%10), byte('0' + year%10), '-',
		byte('0' + month/10), byte('0' + month%10), '-', byte('0' + day/10), byte('0' + day%10), 'T',
		byte('0' + h/10), byte('0' + h%10), ':', byte('0' + m/10), byte('0' + m%10), ':', byte('0' + s/10), byte('0' + s%10)}
	n := 20
	if digits > 0 {
		t[n] = '.'
		frac := uint64(nsec) / pow10[9-digits]
		for i := n + digits; i > n; i-- {
			t[i] = byte('0' + frac%10)
			frac /= 10
		}
		n += 1 + digits
	}
	if zone {
		t[n] = 'Z'
		n++
	}
	t[n] = '"'
	return append(b, t[:n+1]...)
}

// pow10[i] is 10^i.
var pow10 = [10]uint64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// civil returns the proleptic Gregorian date of days since 1970-01-01
// (not negative), by Howard Hinnant's civil_from_days.
func civil(days uint64) (year, month, day uint64) {
	z := days + 719468
	era := z / 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	day = doy - (153*mp+2)/5 + 1
	month = mp + 3
	if month > 12 {
		month -= 12
	}
	year = yoe + era*400
	if month <= 2 {
		year++
	}
	return year, month, day
}
