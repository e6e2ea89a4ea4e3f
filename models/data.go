package models

import (
	"fmt"
	"math"
	"os"
)

// Dataset is tokenized text split into training and validation parts: the
// first 90% of the tokens train, the last 10% validate (as the reference).
type Dataset struct {
	Name  string // file path, or "markov:seed=N" for the embedded corpus
	Tok   *Tokenizer
	Train []int32
	Val   []int32
	// Source is the Markov chain the embedded corpus was drawn from, nil
	// for a text file. With it the best achievable loss is known.
	Source *MarkovSource
}

// TrainFraction is the share of tokens in the training split.
const TrainFraction = 0.9

// LoadText reads a UTF-8 text file and splits it for a model with the given
// block size. Errors wrap ErrBadData for unusable content.
func LoadText(path string, block int) (*Dataset, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: data file: %v", ErrBadData, err)
	}
	d, err := FromText(string(b), block)
	if err != nil {
		return nil, fmt.Errorf("data file %s: %w", path, err)
	}
	d.Name = path
	return d, nil
}

// FromText tokenizes text with its own character vocabulary and splits it.
// Each split must hold at least block+1 characters so that one window of
// inputs and shifted targets fits in it.
func FromText(text string, block int) (*Dataset, error) {
	tok, err := NewTokenizer(text)
	if err != nil {
		return nil, err
	}
	ids, err := tok.Encode(text)
	if err != nil {
		return nil, err // unreachable: the vocabulary came from the text
	}
	train, val, err := split(ids, block)
	if err != nil {
		return nil, err
	}
	return &Dataset{Name: "text", Tok: tok, Train: train, Val: val}, nil
}

// split cuts ids at 90% and checks both parts can hold a window.
func split(ids []int32, block int) (train, val []int32, err error) {
	if block < 1 {
		return nil, nil, fmt.Errorf("%w: block size %d must be positive", ErrBadData, block)
	}
	n := int(TrainFraction * float64(len(ids)))
	train, val = ids[:n], ids[n:]
	if len(train) < block+1 || len(val) < block+1 {
		need := int(math.Ceil(float64(block+1) / (1 - TrainFraction)))
		return nil, nil, fmt.Errorf("%w: %d characters is too short for block size %d: the 10%% validation split needs at least block+1 = %d characters (about %d in all)",
			ErrBadData, len(ids), block, block+1, need)
	}
	return train, val, nil
}

// DefaultCorpus generates the embedded corpus of DefaultCorpusSpec from
// seed: the same seed gives the same chain and the same text.
func DefaultCorpus(seed uint64, block int) (*Dataset, error) {
	return MarkovCorpus(DefaultCorpusSpec(), seed, block)
}

// MarkovCorpus generates spec.Chars characters from the chain of spec built
// from seed. The vocabulary is the whole alphabet (sorted), so token ids
// are the source's symbol ids.
func MarkovCorpus(spec CorpusSpec, seed uint64, block int) (*Dataset, error) {
	src, err := NewMarkovSource(spec, seed)
	if err != nil {
		return nil, err
	}
	ids := src.Generate(spec.Chars, seed)
	tok, err := TokenizerFromChars(string(src.Symbols))
	if err != nil {
		return nil, err
	}
	train, val, err := split(ids, block)
	if err != nil {
		return nil, err
	}
	return &Dataset{Name: fmt.Sprintf("markov:seed=%d", seed), Tok: tok, Train: train, Val: val, Source: src}, nil
}

// UnigramEntropy is the entropy (nats) of the character frequencies of the
// training split: the loss of the best model that ignores context, up to
// the difference between the splits' frequencies.
func (d *Dataset) UnigramEntropy() float64 {
	if d.Source != nil {
		return d.Source.UnigramEntropy()
	}
	counts := make([]float64, d.Tok.Vocab())
	for _, id := range d.Train {
		counts[id]++
	}
	for i := range counts {
		counts[i] /= float64(len(d.Train))
	}
	return entropy(counts)
}
