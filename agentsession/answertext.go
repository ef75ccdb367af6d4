package agentsession

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// answerField is the field of the answer's JSON that a reader sees.
const answerField = "answer_markdown"

// AnswerText turns the text a model writes, as it streams, into what a
// reader should see of it (the text of text_delta events): when the text
// is a JSON object, optionally in a ``` or ```json fence (the structured
// answer's envelope), only the decoded content of its top-level
// answer_markdown string, as it is written; any other text (the model's
// prose) as it is. Nothing of a JSON object other than that string is
// shown, so an envelope without it shows nothing. The zero AnswerText is
// ready for one message; use a new one for each.
type AnswerText struct {
	mode answerMode
	head strings.Builder // the start, until it tells what the text is

	depth     int
	inString  bool
	isKey     bool   // the string being read is a key of the top object
	streaming bool   // the string being read is the answer
	expectKey bool   // the top object's next string is a key
	key       []byte // the key being read
	lastKey   string // the top object's last key
	colon     bool   // the top object's value for lastKey comes next
	esc       bool
	hex       []byte // the digits of a \u escape being read
	high      rune   // a high surrogate waiting for its low half
	held      []byte // the start of a UTF-8 sequence cut by a piece
}

type answerMode int

const (
	modeUnknown answerMode = iota
	modeProse
	modeJSON
	modeDone
)

// Write takes the next piece of the model's text and returns what it adds
// to the reader's text ("" while nothing new is known).
func (a *AnswerText) Write(piece string) string {
	switch a.mode {
	case modeProse:
		return piece
	case modeJSON:
		return a.json(piece)
	case modeDone:
		return ""
	}
	a.head.WriteString(piece)
	head := a.head.String()
	rest := strings.TrimLeft(head, " \t\r\n")
	switch {
	case rest == "":
		return ""
	case rest[0] == '{':
		a.mode = modeJSON
		return a.json(rest)
	case strings.HasPrefix(rest, "```"):
		line, after, complete := strings.Cut(rest, "\n")
		if !complete {
			return ""
		}
		if lang := strings.TrimSpace(strings.TrimPrefix(line, "```")); lang != "" && lang != "json" {
			a.mode = modeProse
			return head
		}
		body := strings.TrimLeft(after, " \t\r\n")
		switch {
		case body == "":
			return ""
		case body[0] == '{':
			a.mode = modeJSON
			return a.json(body)
		}
		a.mode = modeProse
		return head
	case len(rest) < 3 && strings.HasPrefix("```", rest):
		return "" // perhaps a fence
	}
	a.mode = modeProse
	return head
}

// Flush returns what Write held back at the end of the model's text: text
// that might have started a fence and did not.
func (a *AnswerText) Flush() string {
	if a.mode != modeUnknown {
		return ""
	}
	a.mode = modeDone
	if strings.TrimSpace(a.head.String()) == "" {
		return ""
	}
	return a.head.String()
}

// json reads a piece of the JSON object and returns the answer's text it
// holds.
func (a *AnswerText) json(piece string) string {
	var out []byte
	for i := 0; i < len(piece) && a.mode == modeJSON; i++ {
		c := piece[i]
		if a.inString {
			out = a.stringByte(c, out)
			continue
		}
		switch c {
		case '"':
			a.inString = true
			switch {
			case a.depth == 1 && a.expectKey:
				a.isKey, a.key = true, a.key[:0]
			case a.depth == 1 && a.colon && a.lastKey == answerField:
				a.streaming = true
			}
			a.colon = false
		case '{', '[':
			a.depth++
			if a.depth == 1 {
				a.expectKey = c == '{'
			}
			a.colon = false
		case '}', ']':
			a.depth--
			if a.depth <= 0 {
				a.mode = modeDone
			}
		case ':':
			if a.depth == 1 {
				a.colon = true
			}
		case ',':
			if a.depth == 1 {
				a.expectKey = true
			}
		case ' ', '\t', '\r', '\n':
		default:
			a.colon = false // a number, true, false or null
		}
	}
	return a.complete(out)
}

// stringByte reads byte c of a JSON string, adding it to out when the
// string is the answer.
func (a *AnswerText) stringByte(c byte, out []byte) []byte {
	switch {
	case a.hex != nil:
		a.hex = append(a.hex, c)
		if len(a.hex) < 4 {
			return out
		}
		r := hexRune(a.hex)
		a.hex = nil
		return a.addRune(r, out)
	case a.esc:
		a.esc = false
		if c == 'u' {
			a.hex = make([]byte, 0, 4)
			return out
		}
		return a.addRune(unescape(c), out)
	case c == '\\':
		a.esc = true
		return out
	case c == '"':
		out = a.endSurrogate(out)
		a.inString = false
		if a.isKey {
			a.isKey, a.lastKey, a.expectKey = false, string(a.key), false
		}
		if a.streaming {
			a.streaming, a.mode = false, modeDone
		}
		return out
	}
	out = a.endSurrogate(out)
	switch {
	case a.isKey:
		a.key = append(a.key, c)
	case a.streaming:
		out = append(out, c)
	}
	return out
}

// addRune adds a decoded rune of the string, pairing surrogates.
func (a *AnswerText) addRune(r rune, out []byte) []byte {
	if a.high != 0 {
		high := a.high
		a.high = 0
		if utf16.IsSurrogate(r) && r >= 0xDC00 {
			return a.emit(utf16.DecodeRune(high, r), out)
		}
		out = a.emit(utf8.RuneError, out)
	}
	if utf16.IsSurrogate(r) {
		if r < 0xDC00 {
			a.high = r
			return out
		}
		r = utf8.RuneError
	}
	return a.emit(r, out)
}

// endSurrogate ends a high surrogate that no low half follows.
func (a *AnswerText) endSurrogate(out []byte) []byte {
	if a.high == 0 {
		return out
	}
	a.high = 0
	return a.emit(utf8.RuneError, out)
}

// emit adds r to the key or the answer being read.
func (a *AnswerText) emit(r rune, out []byte) []byte {
	switch {
	case a.isKey:
		a.key = utf8.AppendRune(a.key, r)
	case a.streaming:
		out = utf8.AppendRune(out, r)
	}
	return out
}

// complete returns out after what was held back, holding back the start
// of a UTF-8 sequence that the next piece completes.
func (a *AnswerText) complete(out []byte) string {
	if len(a.held) > 0 {
		out = append(a.held, out...)
		a.held = nil
	}
	if a.mode != modeJSON {
		return string(out)
	}
	for i := len(out) - 1; i >= 0 && i >= len(out)-utf8.UTFMax; i-- {
		if utf8.RuneStart(out[i]) {
			if !utf8.FullRune(out[i:]) {
				a.held = append([]byte(nil), out[i:]...)
				out = out[:i]
			}
			break
		}
	}
	return string(out)
}

// hexRune reads four hex digits; a bad digit gives utf8.RuneError.
func hexRune(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return utf8.RuneError
		}
	}
	return r
}

// unescape returns the rune of the JSON escape \c (not \u).
func unescape(c byte) rune {
	switch c {
	case '"', '\\', '/':
		return rune(c)
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
	return utf8.RuneError
}
