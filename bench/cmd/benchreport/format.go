package main

import (
	"math"
	"strconv"
	"strings"
)

// sig3 formats v with three significant digits and no exponent.
func sig3(v float64) string {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	digits := 2 - int(math.Floor(math.Log10(math.Abs(v))))
	if digits < 0 {
		digits = 0
	}
	return strconv.FormatFloat(v, 'f', digits, 64)
}

// isTime reports whether unit is nanoseconds per something.
func isTime(unit string) bool {
	return strings.HasSuffix(unit, "ns/op") || strings.HasSuffix(unit, "-ns")
}

// fmtNs formats nanoseconds with a fitting unit: 762 ns, 31.0 µs, 1.25 ms.
func fmtNs(v float64) string {
	switch a := math.Abs(v); {
	case a < 1e3:
		return sig3(v) + " ns"
	case a < 1e6:
		return sig3(v/1e3) + " µs"
	case a < 1e9:
		return sig3(v/1e6) + " ms"
	}
	return sig3(v/1e9) + " s"
}

// fmtValue formats a value in its unit.
func fmtValue(v float64, unit string) string {
	switch {
	case isTime(unit):
		return fmtNs(v)
	case unit == "×":
		return sig3(v) + "×"
	case unit == unitJobs:
		return thousands(math.Round(v)) + " jobs/s"
	}
	return sig3(v) + " " + unit
}

// thousands formats a whole number with comma separators: 12,345.
func thousands(v float64) string {
	s := strconv.FormatFloat(math.Abs(v), 'f', 0, 64)
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// fmtSummary formats a median and its spread: "123 ns ±2.1%".
func fmtSummary(s summary, unit string) string {
	return fmtValue(s.median, unit) + " ±" + pct(s.spread)
}
