package models

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTokenizerRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		vocab      int
	}{
		{"ascii", "hello world", 8},
		{"one char", "aaaa", 1},
		{"unicode", "héllo, wörld — ☃☃", 12},
		{"newlines", "a\nb\r\nc\t", 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := NewTokenizer(tc.text)
			if err != nil {
				t.Fatalf("NewTokenizer(%q): %v", tc.text, err)
			}
			if tok.Vocab() != tc.vocab {
				t.Errorf("NewTokenizer(%q).Vocab() = %d, want %d", tc.text, tok.Vocab(), tc.vocab)
			}
			ids, err := tok.Encode(tc.text)
			if err != nil {
				t.Fatalf("Encode(%q): %v", tc.text, err)
			}
			if n := utf8.RuneCountInString(tc.text); len(ids) != n {
				t.Errorf("Encode(%q) has %d ids, want %d", tc.text, len(ids), n)
			}
			if got := tok.Decode(ids); got != tc.text {
				t.Errorf("Decode(Encode(%q)) = %q", tc.text, got)
			}
			// ids follow sorted rune order
			again, err := TokenizerFromChars(tok.Chars())
			if err != nil {
				t.Fatalf("TokenizerFromChars(%q): %v", tok.Chars(), err)
			}
			if again.Chars() != tok.Chars() {
				t.Errorf("TokenizerFromChars(Chars()) = %q, want %q", again.Chars(), tok.Chars())
			}
		})
	}
}

func TestTokenizerSortedIDs(t *testing.T) {
	tok, err := NewTokenizer("cab")
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := tok.Encode("abc")
	if fmt.Sprint(ids) != "[0 1 2]" {
		t.Errorf(`Encode("abc") = %v, want [0 1 2] (sorted vocabulary)`, ids)
	}
}

func TestTokenizerErrors(t *testing.T) {
	tok, _ := NewTokenizer("abc")
	if _, err := tok.Encode("abd"); !errors.Is(err, ErrBadData) {
		t.Errorf(`Encode("abd") error = %v, want ErrBadData`, err)
	}
	for _, tc := range []struct{ name, text string }{
		{"empty", ""},
		{"invalid utf8", "ab\xffcd"},
		{"truncated rune", "ab\xe2\x98"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewTokenizer(tc.text); !errors.Is(err, ErrBadData) {
				t.Errorf("NewTokenizer(%q) error = %v, want ErrBadData", tc.text, err)
			}
		})
	}
	for _, chars := range []string{"", "ba", "aab", "\xff"} {
		if _, err := TokenizerFromChars(chars); !errors.Is(err, ErrBadData) {
			t.Errorf("TokenizerFromChars(%q) error = %v, want ErrBadData", chars, err)
		}
	}
}

func ExampleTokenizer() {
	tok, _ := NewTokenizer("to be or not to be")
	ids, _ := tok.Encode("be not")
	fmt.Println(tok.Vocab(), ids, tok.Decode(ids))
	// Output: 7 [1 2 0 3 4 6] be not
}

// FuzzTokenizer: any bytes either fail with ErrBadData or round-trip.
func FuzzTokenizer(f *testing.F) {
	for _, s := range []string{"", "a", "hello world", "héllo ☃", "ab\xffcd", "\x00\x01", "aaaa\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := NewTokenizer(s)
		if err != nil {
			if !errors.Is(err, ErrBadData) {
				t.Fatalf("NewTokenizer(%q) error = %v, want ErrBadData", s, err)
			}
			if utf8.ValidString(s) && s != "" {
				t.Fatalf("NewTokenizer(%q) rejected valid text: %v", s, err)
			}
			return
		}
		ids, err := tok.Encode(s)
		if err != nil {
			t.Fatalf("Encode(%q): %v", s, err)
		}
		if got := tok.Decode(ids); got != s {
			t.Fatalf("Decode(Encode(%q)) = %q", s, got)
		}
	})
}

// TestEncodeErrorListsVocabulary: a character outside the vocabulary is
// named with the vocabulary (or its size and first characters).
func TestEncodeErrorListsVocabulary(t *testing.T) {
	tok, err := NewTokenizer("abc\n")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tok.Encode("abz")
	if !errors.Is(err, ErrBadData) || !strings.Contains(err.Error(), `'z'`) || !strings.Contains(err.Error(), `4 characters: "\nabc"`) {
		t.Errorf("Encode(abz) = %v, want ErrBadData naming 'z' and the 4 characters \"\\nabc\"", err)
	}
	big, err := NewTokenizer(strings.Repeat("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?", 2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := big.Encode("~"); err == nil || !strings.Contains(err.Error(), "68 characters") || !strings.Contains(err.Error(), "(4 more)") {
		t.Errorf("Encode(~) on 68 characters = %v, want the first 64 and (4 more)", err)
	}
}
