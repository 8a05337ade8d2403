package strictjson

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Scan is what ScanObject learned about a JSON object that has none of
// CheckObject's problems.
type Scan struct {
	// Len is the object's length in bytes, from its '{' to its '}'.
	Len int
	// Compact reports that there is no whitespace between the object's
	// tokens: json.Compact would not change it.
	Compact bool
	// HTMLSafe reports that no string holds '<', '>', '&', U+2028 or
	// U+2029, the characters encoding/json escapes when it writes a
	// json.RawMessage: json.Marshal of a compact, HTML-safe object writes
	// it unchanged.
	HTMLSafe bool
}

// ScanObject checks the JSON object that starts data (data[0] must be
// its '{'; bytes after the object are not read) in one pass: the grammar
// of RFC 8259, strings of valid UTF-8 with escapes of whole surrogate
// pairs only, no member name repeated within one object (names compared
// after unescaping, as RFC 7493 asks), numbers within a double's range
// (NumberInRange), and objects and arrays nested at most maxDepth deep
// (the object itself is depth 1). ok is false when the
// object has any of those problems, or data does not start with one;
// CheckObject says which problem it is.
//
// It is the publish path's check of every message, so it reads each byte
// once, allocates nothing for a message whose member names have no
// escapes, and reports what the encoders after it would otherwise scan
// for again (Scan.Compact, Scan.HTMLSafe).
func ScanObject(data []byte, maxDepth int) (Scan, bool) {
	if len(data) == 0 || data[0] != '{' {
		return Scan{}, false
	}
	st := statePool.Get().(*nameState)
	s := scanner{data: data, maxDepth: maxDepth, names: st.names[:0], unesc: st.unesc[:0]}
	ok := s.object(1)
	st.names, st.unesc = s.names[:0], s.unesc[:0]
	statePool.Put(st)
	if !ok {
		return Scan{}, false
	}
	return Scan{Len: s.i, Compact: !s.space, HTMLSafe: !s.html}, true
}

// nameState is what a scanner keeps between messages: its name stack and
// the buffer of unescaped names. Neither holds a pointer, so a pooled one
// keeps no message alive and costs the garbage collector nothing.
type nameState struct {
	names []nameRef
	unesc []byte
}

// statePool holds the scanners' name stacks: a message's member names are
// kept while its objects are open, and a fresh stack per message would be
// as big an allocation as the message.
var statePool = sync.Pool{New: func() any { return &nameState{names: make([]nameRef, 0, 4*linearNames)} }}

// nameRef is a member name, by offsets: data[start:end] when the name has
// no escape, else its unescaped value unesc[^start:end]. Offsets rather
// than slices: appending a slice to the stack is a pointer write (with
// the garbage collector's write barrier while it marks), and a stack of
// slices would have to be cleared before going back to the pool.
type nameRef struct{ start, end int }

// scanner is ScanObject's state. Its methods start at s.i and leave s.i
// just past what they read; false means the text is not valid (or too
// deep), and s.i is then meaningless.
type scanner struct {
	data     []byte
	i        int
	maxDepth int
	space    bool      // whitespace seen between tokens
	html     bool      // '<', '>', '&', U+2028 or U+2029 seen in a string
	names    []nameRef // member names of the objects open now, outermost first
	unesc    []byte    // the unescaped values of names with escapes
}

// name returns the value of member name r.
func (s *scanner) name(r nameRef) []byte {
	if r.start < 0 {
		return s.unesc[^r.start:r.end]
	}
	return s.data[r.start:r.end]
}

// Byte classes inside a string.
const (
	plain     = iota // printable ASCII that needs nothing
	quote            // '"': the end of the string
	backslash        // an escape follows
	control          // U+0000–U+001F: not allowed unescaped
	nonASCII         // the first byte of a multi-byte UTF-8 sequence (or not UTF-8)
	htmlChar         // '<', '>' or '&'
)

var stringClass = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = control
	}
	for c := 0x80; c < 0x100; c++ {
		t[c] = nonASCII
	}
	t['"'], t['\\'] = quote, backslash
	t['<'], t['>'], t['&'] = htmlChar, htmlChar, htmlChar
	return t
}()

// skipSpace skips whitespace, noting that there was some.
func (s *scanner) skipSpace() {
	if s.i < len(s.data) && s.data[s.i] > ' ' {
		return // compact JSON: the usual case, kept inlinable
	}
	s.skipSpaces()
}

func (s *scanner) skipSpaces() {
	start := s.i
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
			continue
		}
		break
	}
	if s.i != start {
		s.space = true
	}
}

func (s *scanner) value(depth int) bool {
	if s.i >= len(s.data) {
		return false
	}
	switch c := s.data[s.i]; c {
	case '{':
		return s.object(depth + 1)
	case '[':
		return s.array(depth + 1)
	case '"':
		_, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

func (s *scanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.data[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

func (s *scanner) object(depth int) bool {
	if depth > s.maxDepth {
		return false
	}
	s.i++ // '{'
	s.skipSpace()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return true
	}
	base := len(s.names)
	ok := s.members(depth, base)
	s.names = s.names[:base]
	return ok
}

// members reads an object's members, from its first name to its '}';
// its names are kept in s.names from base on.
func (s *scanner) members(depth, base int) bool {
	var seen map[string]struct{} // once the object has many members
	for {
		if s.i >= len(s.data) || s.data[s.i] != '"' {
			return false
		}
		start := s.i + 1
		escaped, ok := s.str()
		if !ok {
			return false
		}
		ref := nameRef{start, s.i - 1}
		if escaped {
			from := len(s.unesc)
			s.unesc = unescape(s.unesc, s.data[start:s.i-1])
			ref = nameRef{^from, len(s.unesc)}
		}
		if !s.unique(base, ref, &seen) {
			return false
		}
		s.skipSpace()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return false
		}
		s.i++
		s.skipSpace()
		if !s.value(depth) {
			return false
		}
		s.skipSpace()
		if s.i >= len(s.data) {
			return false
		}
		switch s.data[s.i] {
		case ',':
			s.i++
			s.skipSpace()
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// linearNames is how many member names an object's repeat check
// compares one by one before it keeps them in a map.
const linearNames = 16

// unique records ref as a member of the object whose names start at
// s.names[base], and reports whether it is new there.
func (s *scanner) unique(base int, ref nameRef, seen *map[string]struct{}) bool {
	name := s.name(ref)
	if *seen != nil {
		if _, dup := (*seen)[string(name)]; dup {
			return false
		}
		(*seen)[string(name)] = struct{}{}
		return true
	}
	for _, n := range s.names[base:] {
		if bytes.Equal(s.name(n), name) {
			return false
		}
	}
	s.names = append(s.names, ref)
	if len(s.names)-base > linearNames {
		*seen = make(map[string]struct{}, 2*linearNames)
		for _, n := range s.names[base:] {
			(*seen)[string(s.name(n))] = struct{}{}
		}
	}
	return true
}

func (s *scanner) array(depth int) bool {
	if depth > s.maxDepth {
		return false
	}
	s.i++ // '['
	s.skipSpace()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return true
	}
	for {
		if !s.value(depth) {
			return false
		}
		s.skipSpace()
		if s.i >= len(s.data) {
			return false
		}
		switch s.data[s.i] {
		case ',':
			s.i++
			s.skipSpace()
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// str reads the string at s.i (its opening quote) and reports whether it
// has an escape.
func (s *scanner) str() (escaped, ok bool) {
	data := s.data
	i := s.i + 1 // '"'
	for {
		i = plainRun(data, i)
		if i >= len(data) {
			return false, false
		}
		switch stringClass[data[i]] {
		case quote:
			s.i = i + 1
			return escaped, true
		case backslash:
			s.i = i
			if !s.escape() {
				return false, false
			}
			i = s.i
			escaped = true
		case control:
			return false, false
		case htmlChar:
			s.html = true
			i++
		case nonASCII:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return false, false
			}
			if r == '\u2028' || r == '\u2029' {
				s.html = true
			}
			i += size
		}
	}
}

// plainRun returns the index of the first byte of data at or after i
// that is not plain inside a string (see stringClass), or len(data). It
// tests eight bytes at a time (SWAR: the classic "has a zero byte" and
// "has a byte below n" tests on a uint64), since a message is mostly
// string contents and a byte-by-byte loop was over half of a scan.
func plainRun(data []byte, i int) int {
	for i+8 <= len(data) {
		if notPlain(binary.LittleEndian.Uint64(data[i:])) {
			break
		}
		i += 8
	}
	for i < len(data) && stringClass[data[i]] == plain {
		i++
	}
	return i
}

// Bytes repeated in every lane of a uint64, for notPlain. '"' (0x22) and
// '&' (0x26) differ only in bit 0x04, '<' (0x3C) and '>' (0x3E) only in
// bit 0x02: with that bit set first, one zero test finds either of a pair.
const (
	lanes01     = 0x0101010101010101
	lanes80     = 0x8080808080808080
	lanes02     = 0x02 * lanes01
	lanes04     = 0x04 * lanes01
	lanesQuoAmp = '&' * lanes01 // '"' | 0x04 == '&'
	lanesLtGt   = '>' * lanes01 // '<' | 0x02 == '>'
	lanesBack   = '\\' * lanes01
)

// notPlain reports whether any of the eight bytes in x is not plain: a
// control character (below 0x20), non-ASCII (0x80 and up), '"', '\\',
// '<', '>' or '&'. Exact as a whole (no false positives or negatives),
// though not which byte it is: b|0x04 is '&' only for '"' and '&', and
// b|0x02 is '>' only for '<' and '>'.
func notPlain(x uint64) bool {
	// A byte below 0x20 borrows when 0x20 is taken from it; the &^x keeps
	// that to bytes that were below 0x80.
	below := (x - 0x20*lanes01) &^ x
	return (x|below|hasZero((x|lanes04)^lanesQuoAmp)|hasZero((x|lanes02)^lanesLtGt)|
		hasZero(x^lanesBack))&lanes80 != 0
}

// hasZero has the top bit of a lane set, in some lane, exactly when some
// byte of v is zero (the lanes' top bits are not otherwise meaningful).
func hasZero(v uint64) uint64 { return (v - lanes01) &^ v }

// escape reads the escape at s.i (its backslash). A \u escape of a high
// surrogate must be followed by one of a low surrogate; a lone low
// surrogate is refused too (neither is UTF-8).
func (s *scanner) escape() bool {
	if s.i+1 >= len(s.data) {
		return false
	}
	switch s.data[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return true
	case 'u':
	default:
		return false
	}
	r, ok := hex4(s.data[s.i+2:])
	if !ok {
		return false
	}
	s.i += 6
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return false
	case r >= 0xD800 && r <= 0xDBFF:
		if s.i+1 >= len(s.data) || s.data[s.i] != '\\' || s.data[s.i+1] != 'u' {
			return false
		}
		lo, ok := hex4(s.data[s.i+2:])
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return false
		}
		s.i += 6
	}
	return true
}

// hex4 decodes the four hex digits that start b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// unescape appends to out the value of the valid string contents raw
// (without its quotes), escapes decoded.
func unescape(out, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch e := raw[i+1]; e {
		case 'u':
			r, _ := hex4(raw[i+2:])
			i += 6
			if r >= 0xD800 && r <= 0xDBFF {
				lo, _ := hex4(raw[i+2:])
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				i += 6
			}
			out = utf8.AppendRune(out, r)
		default:
			out = append(out, unescaped(e))
			i += 2
		}
	}
	return out
}

// unescaped is the byte a one-letter escape \e stands for.
func unescaped(e byte) byte {
	switch e {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return e // '"', '\\' and '/' stand for themselves
}

func (s *scanner) number() bool {
	d := s.data
	i := s.i
	start := i
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digits(d, i)
	default:
		return false
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	mantissa := i - start
	expDigits := 0
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			return false
		}
		expDigits, i = j-i, j
	}
	s.i = i
	// Within range for sure, without parsing: a mantissa of at most
	// safeMantissa bytes lies in [1e-200, 1e200) when it is not zero, and
	// an exponent of at most two digits moves it by at most 10^±99. Any
	// other number (rare) is parsed.
	if mantissa <= safeMantissa && expDigits <= 2 {
		return true
	}
	return NumberInRange(d[start:i])
}

// safeMantissa is the longest mantissa (sign, digits and point) that
// number need not parse: see there.
const safeMantissa = 200

// NumberInRange reports whether lit, a JSON number (RFC 8259 grammar),
// is within the range of an IEEE 754 double (binary64), the rule
// ScanObject and CheckObject enforce (RFC 7493, I-JSON §2.2: numbers
// should be representable as doubles): it neither overflows (rounds to
// ±Inf: a magnitude of about 1.8e308 or more) nor, when it is not zero,
// underflows to zero (a magnitude below about 2.5e-324, half the least
// subnormal double, such as 1e-400). Precision may be lost: a 300-digit
// integer is in range. Every protobuf runtime decodes a message's numbers
// as doubles (google.protobuf.Value), so a number outside the range
// cannot reach a gRPC consumer as it was sent.
func NumberInRange(lit []byte) bool {
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return false // ErrRange: overflow (the grammar was checked)
	}
	if f != 0 {
		return true
	}
	// Zero: fine when the literal is zero, underflow when it is not.
	for _, c := range lit {
		switch {
		case c == 'e' || c == 'E':
			return true
		case c >= '1' && c <= '9':
			return false
		}
	}
	return true
}

// digits returns the index past the run of decimal digits at d[i].
func digits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}
