// Package strpack keeps several strings of a long-lived record in one allocation. Strings a decoder made
// each sit in a small slot of their own, amid the garbage the rest of the decoded object leaves behind;
// one allocation holding all of a record's strings takes less room and pins one slot instead of several.
package strpack

import "strings"

// Join returns parts concatenated in one allocation and sets ends[i] to the offset where parts[i] ends,
// for each i below both lengths: a record that keeps the joined string and ends finds part i at
// joined[ends[i-1]:ends[i]] (from 0 for the first; the last part, when ends has no slot for it, runs to
// the end).
func Join(parts []string, ends []uint32) string {
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	var b strings.Builder
	b.Grow(size)
	for i, p := range parts {
		b.WriteString(p)
		if i < len(ends) {
			ends[i] = uint32(b.Len())
		}
	}
	return b.String()
}

// Copy returns copies of parts that share one allocation, nil for none.
func Copy(parts []string) []string {
	if len(parts) == 0 {
		return nil
	}
	all := Join(parts, nil)
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i], all = all[:len(p)], all[len(p):]
	}
	return out
}
