package models

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrBadData marks input text that cannot be used for training: not UTF-8,
// too short for the block size, or holding characters outside a vocabulary.
// The command line maps it to exit status 2.
var ErrBadData = errors.New("bad data")

// Tokenizer is a character-level vocabulary: token i is the i-th of the
// text's distinct runes in sorted order, as the reference's sorted(set(text)).
type Tokenizer struct {
	runes []rune         // id -> rune, sorted ascending
	ids   map[rune]int32 // rune -> id
}

// NewTokenizer builds the vocabulary of text. The text must be valid UTF-8
// and not empty.
func NewTokenizer(text string) (*Tokenizer, error) {
	if !utf8.ValidString(text) {
		return nil, fmt.Errorf("%w: text is not valid UTF-8 (first bad byte at offset %d)", ErrBadData, firstInvalid(text))
	}
	if text == "" {
		return nil, fmt.Errorf("%w: text is empty", ErrBadData)
	}
	seen := map[rune]bool{}
	for _, r := range text {
		seen[r] = true
	}
	runes := make([]rune, 0, len(seen))
	for r := range seen {
		runes = append(runes, r)
	}
	slices.Sort(runes)
	return newTokenizer(runes), nil
}

// TokenizerFromChars rebuilds a tokenizer from its Chars string (as stored
// in a checkpoint): the runes must be valid UTF-8, distinct and ascending.
func TokenizerFromChars(chars string) (*Tokenizer, error) {
	if !utf8.ValidString(chars) || chars == "" {
		return nil, fmt.Errorf("%w: vocabulary %q is empty or not UTF-8", ErrBadData, chars)
	}
	runes := []rune(chars)
	for i := 1; i < len(runes); i++ {
		if runes[i] <= runes[i-1] {
			return nil, fmt.Errorf("%w: vocabulary is not sorted and distinct at rune %d (%q after %q)", ErrBadData, i, runes[i], runes[i-1])
		}
	}
	return newTokenizer(runes), nil
}

func newTokenizer(runes []rune) *Tokenizer {
	ids := make(map[rune]int32, len(runes))
	for i, r := range runes {
		ids[r] = int32(i)
	}
	return &Tokenizer{runes: runes, ids: ids}
}

// Vocab is the number of tokens.
func (t *Tokenizer) Vocab() int { return len(t.runes) }

// Chars returns the vocabulary as one string, token 0 first.
func (t *Tokenizer) Chars() string { return string(t.runes) }

// Encode maps every rune of s to its token. A rune outside the vocabulary is
// an error naming it and its position.
func (t *Tokenizer) Encode(s string) ([]int32, error) {
	out := make([]int32, 0, len(s))
	pos := 0
	for _, r := range s {
		id, ok := t.ids[r]
		if !ok {
			return nil, fmt.Errorf("%w: character %q at position %d is not in the vocabulary of %d characters: %s",
				ErrBadData, r, pos, len(t.runes), t.sample(64))
		}
		out = append(out, id)
		pos++
	}
	return out, nil
}

// sample shows the vocabulary in a message, quoted, its first n
// characters when it has more.
func (t *Tokenizer) sample(n int) string {
	if len(t.runes) <= n {
		return fmt.Sprintf("%q", string(t.runes))
	}
	return fmt.Sprintf("%q… (%d more)", string(t.runes[:n]), len(t.runes)-n)
}

// Decode maps tokens back to text; an id outside the vocabulary becomes
// U+FFFD.
func (t *Tokenizer) Decode(ids []int32) string {
	var b strings.Builder
	b.Grow(len(ids))
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.runes) {
			b.WriteRune(utf8.RuneError)
			continue
		}
		b.WriteRune(t.runes[id])
	}
	return b.String()
}

// firstInvalid returns the byte offset of the first invalid UTF-8 sequence.
func firstInvalid(s string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}
