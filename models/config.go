package models

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// Config is the shape of a GPT and of its training batch.
type Config struct {
	Vocab   int     // V: vocabulary size (tokens are 0..Vocab-1)
	Block   int     // longest sequence (rows of transformer.wpe)
	Layers  int     // transformer blocks
	Heads   int     // attention heads; Embd must be a multiple
	Embd    int     // C: embedding width
	Batch   int     // B: sequences per training step
	Dropout float64 // dropout probability in [0, 1); 0 builds no dropout at all
}

// ErrConfig marks an invalid configuration.
var ErrConfig = errors.New("invalid GPT config")

var presets = map[string]Config{
	"tiny":  {Vocab: 65, Block: 16, Layers: 2, Heads: 2, Embd: 32, Batch: 2},
	"small": {Vocab: 65, Block: 64, Layers: 2, Heads: 4, Embd: 64, Batch: 16},
	"baby":  {Vocab: 65, Block: 64, Layers: 4, Heads: 4, Embd: 128, Batch: 12},
}

// PresetNames lists the preset names in a fixed order.
func PresetNames() []string { return []string{"tiny", "small", "baby"} }

// Preset returns the named configuration ("tiny", "small", "baby"), with
// dropout 0.
func Preset(name string) (Config, error) {
	c, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("%w: unknown preset %q (want tiny, small or baby)", ErrConfig, name)
	}
	return c, nil
}

// Validate reports the first invalid field, naming it and its value.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"vocab", c.Vocab}, {"block", c.Block}, {"layers", c.Layers}, {"heads", c.Heads}, {"embd", c.Embd}, {"batch", c.Batch}} {
		if f.v <= 0 {
			return fmt.Errorf("%w: %s = %d, want > 0", ErrConfig, f.name, f.v)
		}
	}
	if c.Embd%c.Heads != 0 {
		return fmt.Errorf("%w: embd = %d is not divisible by heads = %d", ErrConfig, c.Embd, c.Heads)
	}
	if !(c.Dropout >= 0 && c.Dropout < 1) { // also rejects NaN
		return fmt.Errorf("%w: dropout = %v, want in [0, 1)", ErrConfig, c.Dropout)
	}
	if c.Vocab > 1<<24 {
		return fmt.Errorf("%w: vocab = %d, want <= %d", ErrConfig, c.Vocab, 1<<24)
	}
	return nil
}

// HeadSize is Embd/Heads.
func (c Config) HeadSize() int { return c.Embd / c.Heads }

// ConfigKeys lists the keys Set accepts.
func ConfigKeys() []string {
	return []string{"vocab", "block", "layers", "heads", "embd", "batch", "dropout"}
}

// Set overrides one field from its textual value (the --set key=value
// form): an unknown key or a value of the wrong type is an error naming
// both. It does not validate the whole config; call Validate after the
// last override.
func (c *Config) Set(key, value string) error {
	if key == "dropout" {
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("%w: dropout = %q is not a number", ErrConfig, value)
		}
		c.Dropout = f
		return nil
	}
	p := c.intField(key)
	if p == nil {
		return fmt.Errorf("%w: unknown key %q (want one of %v)", ErrConfig, key, ConfigKeys())
	}
	n, err := strconv.Atoi(value)
	if err != nil {
		return fmt.Errorf("%w: %s = %q is not an integer", ErrConfig, key, value)
	}
	*p = n
	return nil
}

func (c *Config) intField(key string) *int {
	switch key {
	case "vocab":
		return &c.Vocab
	case "block":
		return &c.Block
	case "layers":
		return &c.Layers
	case "heads":
		return &c.Heads
	case "embd":
		return &c.Embd
	case "batch":
		return &c.Batch
	}
	return nil
}

// Metadata is the config as safetensors __metadata__, decimal strings under
// the reference's keys (vocab_size, block_size, n_layer, n_head, n_embd)
// plus batch and dropout.
func (c Config) Metadata() map[string]string {
	return map[string]string{
		"vocab_size": strconv.Itoa(c.Vocab),
		"block_size": strconv.Itoa(c.Block),
		"n_layer":    strconv.Itoa(c.Layers),
		"n_head":     strconv.Itoa(c.Heads),
		"n_embd":     strconv.Itoa(c.Embd),
		"batch":      strconv.Itoa(c.Batch),
		"dropout":    strconv.FormatFloat(c.Dropout, 'g', -1, 64),
	}
}

// ConfigFromMetadata reads a config written by Metadata or by the reference
// (which stores no batch: Batch is then 1). The model keys are required;
// the result is validated.
func ConfigFromMetadata(meta map[string]string) (Config, error) {
	c := Config{Batch: 1}
	keys := []struct {
		key string
		dst *int
	}{{"vocab_size", &c.Vocab}, {"block_size", &c.Block}, {"n_layer", &c.Layers}, {"n_head", &c.Heads}, {"n_embd", &c.Embd}}
	for _, k := range keys {
		s, ok := meta[k.key]
		if !ok {
			have := make([]string, 0, len(meta))
			for m := range meta {
				have = append(have, m)
			}
			sort.Strings(have)
			return Config{}, fmt.Errorf("%w: metadata has no %q (has %v)", ErrConfig, k.key, have)
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return Config{}, fmt.Errorf("%w: metadata %s = %q is not an integer", ErrConfig, k.key, s)
		}
		*k.dst = n
	}
	if s, ok := meta["batch"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil {
			return Config{}, fmt.Errorf("%w: metadata batch = %q is not an integer", ErrConfig, s)
		}
		c.Batch = n
	}
	if s, ok := meta["dropout"]; ok {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return Config{}, fmt.Errorf("%w: metadata dropout = %q is not a number", ErrConfig, s)
		}
		c.Dropout = f
	}
	return c, c.Validate()
}
