package openai

import (
	"strings"
	"unicode/utf8"
)

// textStream turns one choice's tokens into text deltas: it decodes
// piece by piece (holding back a token that ends inside a character),
// watches the text for stop strings and holds back what could be the
// start of one, so that no delta ever shows a stop string or any part of
// it.
type textStream struct {
	b       Backend
	stops   []string
	pending []int32 // tokens whose text ends inside a character
	held    string  // decoded, not yet sent: it may begin a stop string
}

// maxPending bounds the tokens held for an unfinished character (UTF-8
// needs at most 4 bytes; a token of U+FFFD itself must not stall).
const maxPending = 4

// add takes a token and returns the text that can be sent now; stopped
// reports that a stop string appeared (the text before it is returned,
// nothing after it ever is).
func (t *textStream) add(id int32) (delta string, stopped bool) {
	t.pending = append(t.pending, id)
	piece := t.b.Decode(t.pending)
	if strings.HasSuffix(piece, string(utf8.RuneError)) && len(t.pending) < maxPending {
		return "", false
	}
	t.pending = t.pending[:0]
	t.held += piece
	if len(t.stops) == 0 {
		delta, t.held = t.held, ""
		return delta, false
	}
	// A stop string cannot begin in text already sent: what was sent
	// never ended with the start of one.
	cut := -1
	for _, s := range t.stops {
		if i := strings.Index(t.held, s); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		delta, t.held = t.held[:cut], ""
		return delta, true
	}
	keep := 0 // the longest end of held that begins a stop string
	for _, s := range t.stops {
		for k := min(len(s)-1, len(t.held)); k > keep; k-- {
			if strings.HasSuffix(t.held, s[:k]) {
				keep = k
				break
			}
		}
	}
	delta, t.held = t.held[:len(t.held)-keep], t.held[len(t.held)-keep:]
	return delta, false
}

// flush returns what is held when the choice ends without a stop string.
func (t *textStream) flush() string {
	if len(t.pending) > 0 {
		t.held += t.b.Decode(t.pending)
		t.pending = t.pending[:0]
	}
	out := t.held
	t.held = ""
	return out
}
