package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// job is a validated request: one backend request per prompt, all with
// the same sampling settings.
type job struct {
	chat         bool
	model        string
	prompts      [][]int32
	gen          GenerateRequest // without Prompt
	seeded       bool            // the client gave a seed
	stop         []string
	stream       bool
	includeUsage bool
}

// Limits of a request, beside the backend's context window.
const (
	maxStops    = 4   // stop strings, as OpenAI allows
	maxStopLen  = 256 // bytes in one stop string
	maxPrompts  = 64  // prompts in one completion request
	maxMessages = 256 // messages in one chat request
	// defaultMaxTokens is max_tokens when a completion request omits it,
	// as OpenAI's completions API has it; a chat request's default is the
	// rest of the context window, as vLLM's.
	defaultMaxTokens = 16
)

// fields is a JSON object, each field kept raw until it is read.
type fields map[string]json.RawMessage

// parseFields reads the body as one JSON object.
func parseFields(body []byte) (fields, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var f fields
	if err := dec.Decode(&f); err != nil {
		return nil, badRequest("", "invalid_json", "the body is not valid JSON: %v", err)
	}
	if f == nil {
		return nil, badRequest("", "invalid_json", "the body is JSON null; want an object")
	}
	if dec.More() {
		return nil, badRequest("", "invalid_json", "the body holds more than one JSON value")
	}
	return f, nil
}

// has reports whether the field is present and not null.
func (f fields) has(name string) bool {
	v, ok := f[name]
	return ok && string(v) != "null"
}

// read decodes a field into v (left as it is when absent or null).
func (f fields) read(name string, v any, want string) error {
	if !f.has(name) {
		return nil
	}
	if err := json.Unmarshal(f[name], v); err != nil {
		return badRequest(name, "invalid_type", "%s: want %s, got %s", name, want, clip(string(f[name])))
	}
	return nil
}

// integer reads a whole number in [lo, hi] (JSON 16 and 16.0 both are).
func (f fields) integer(name string, def, lo, hi int64) (int64, error) {
	if !f.has(name) {
		return def, nil
	}
	raw := strings.TrimSpace(string(f[name]))
	notInt := badRequest(name, "invalid_type", "%s: want an integer, got %s", name, clip(raw))
	if raw == "" || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, notInt
	}
	x, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		v, ferr := strconv.ParseFloat(raw, 64)
		switch {
		case ferr == nil && v == math.Trunc(v) && math.Abs(v) < 1<<53:
			x = int64(v)
		case ferr == nil && v == math.Trunc(v), errors.Is(err, strconv.ErrRange):
			return 0, badRequest(name, "out_of_range", "%s = %s: want %d to %d", name, clip(raw), lo, hi)
		default:
			return 0, notInt
		}
	}
	if x < lo || x > hi {
		return 0, badRequest(name, "out_of_range", "%s = %s: want %d to %d", name, clip(raw), lo, hi)
	}
	return x, nil
}

// number reads a number in [lo, hi] (or (lo, hi] when openLo).
func (f fields) number(name string, def, lo, hi float64, openLo bool) (float64, error) {
	if !f.has(name) {
		return def, nil
	}
	var x float64
	if err := f.read(name, &x, "a number"); err != nil {
		return 0, err
	}
	if x < lo || x > hi || (openLo && x == lo) {
		left := "["
		if openLo {
			left = "("
		}
		return 0, badRequest(name, "out_of_range", "%s = %s: want a number in %s%g, %g]", name, clip(string(f[name])), left, lo, hi)
	}
	return x, nil
}

// unsupported refuses a field of OpenAI's API the server does not
// implement, unless it holds the value that means "off".
func (f fields) unsupported(name string, off ...string) error {
	if !f.has(name) {
		return nil
	}
	v := strings.TrimSpace(string(f[name]))
	for _, o := range off {
		if v == o {
			return nil
		}
	}
	return badRequest(name, "unsupported_parameter", "%s = %s is not supported by this server (want %s or null)", name, clip(v), strings.Join(off, " or "))
}

// clip shortens a value quoted in a message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// parseCommon reads what completions and chat share: model, sampling,
// stop, n, stream, and the fields of OpenAI's API left at "off".
func parseCommon(f fields, b Backend, j *job) error {
	j.model = b.ModelID()
	if f.has("model") {
		var m string
		if err := f.read("model", &m, "a string"); err != nil {
			return err
		}
		if m != b.ModelID() {
			return badRequest("model", "model_not_found", "model %q is not served here; this server serves %q (GET /v1/models)", clip(m), b.ModelID())
		}
	}
	var err error
	if j.gen.Temperature, err = f.number("temperature", 1, 0, 2, false); err != nil {
		return err
	}
	if j.gen.TopP, err = f.number("top_p", 1, 0, 1, true); err != nil {
		return err
	}
	topK, err := f.integer("top_k", 0, -1, math.MaxInt32)
	if err != nil {
		return err
	}
	j.gen.TopK = int(max(topK, 0)) // vLLM's -1 and 0 both keep every token
	if f.has("seed") {
		seed, err := f.integer("seed", 0, math.MinInt64, math.MaxInt64)
		if err != nil {
			return err
		}
		j.gen.Seed, j.seeded = uint64(seed), true
	}
	if n, err := f.integer("n", 1, 1, math.MaxInt32); err != nil {
		return err
	} else if n != 1 {
		return badRequest("n", "unsupported_parameter", "n = %d: this server returns one choice per prompt (n = 1)", n)
	}
	if j.stop, err = parseStop(f); err != nil {
		return err
	}
	if err := f.read("stream", &j.stream, "true or false"); err != nil {
		return err
	}
	if f.has("stream_options") {
		if !j.stream {
			return badRequest("stream_options", "invalid_value", "stream_options is only allowed with stream: true")
		}
		var so struct {
			IncludeUsage *bool `json:"include_usage"`
		}
		if err := f.read("stream_options", &so, `an object {"include_usage": true|false}`); err != nil {
			return err
		}
		j.includeUsage = so.IncludeUsage != nil && *so.IncludeUsage
	}
	var ignoreEOS bool // accepted: the models served have no end token to ignore
	if err := f.read("ignore_eos", &ignoreEOS, "true or false"); err != nil {
		return err
	}
	for _, u := range []struct {
		name string
		off  []string
	}{
		{"presence_penalty", []string{"0", "0.0"}}, {"frequency_penalty", []string{"0", "0.0"}},
		{"repetition_penalty", []string{"1", "1.0"}}, {"best_of", []string{"1"}},
		{"logit_bias", []string{"{}"}}, {"tools", []string{"[]"}},
	} {
		if err := f.unsupported(u.name, u.off...); err != nil {
			return err
		}
	}
	return nil
}

// parseStop reads stop: a string or a list of up to maxStops strings.
func parseStop(f fields) ([]string, error) {
	if !f.has("stop") {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(f["stop"], &one); err == nil {
		return checkStops([]string{one})
	}
	var list []string
	if err := f.read("stop", &list, "a string or a list of strings"); err != nil {
		return nil, err
	}
	return checkStops(list)
}

func checkStops(list []string) ([]string, error) {
	if len(list) > maxStops {
		return nil, badRequest("stop", "out_of_range", "stop: %d strings, want at most %d", len(list), maxStops)
	}
	var out []string
	for _, s := range list {
		if len(s) > maxStopLen {
			return nil, badRequest("stop", "out_of_range", "stop: a string of %d bytes, want at most %d", len(s), maxStopLen)
		}
		if s != "" { // OpenAI ignores an empty stop string
			out = append(out, s)
		}
	}
	return out, nil
}

// maxTokens reads the output budget from the first of names present and
// checks it against the window for the longest prompt.
func maxTokens(f fields, b Backend, j *job, def int64, names ...string) error {
	window := int64(b.ContextWindow())
	longest := 0
	for _, p := range j.prompts {
		longest = max(longest, len(p))
	}
	name := names[0]
	for _, n := range names {
		if f.has(n) {
			name = n
			break
		}
	}
	if def < 0 { // the rest of the window
		def = max(1, window-int64(longest))
	}
	m, err := f.integer(name, def, math.MinInt64, math.MaxInt64)
	var ae *apiError
	if errors.As(err, &ae) && ae.Code == "out_of_range" { // past int64: say which way
		m = math.MaxInt64
		if strings.HasPrefix(strings.TrimSpace(string(f[name])), "-") {
			m = math.MinInt64
		}
	} else if err != nil {
		return err
	}
	switch {
	case m < 1:
		return badRequest(name, "out_of_range", "%s = %s: want at least 1", name, clip(string(f[name])))
	case m > window:
		return badRequest(name, "out_of_range", "%s = %s is more than the model's context window of %d tokens", name, clip(string(f[name])), window)
	case int64(longest)+m > window:
		return badRequest(name, "context_length_exceeded",
			"the prompt's %d tokens plus %s = %d make %d, over the model's context window of %d tokens; shorten the prompt or lower %s",
			longest, name, m, int64(longest)+m, window, name)
	}
	j.gen.MaxTokens = int(m)
	return nil
}

// encodePrompt encodes one prompt's text; which names it in messages.
func encodePrompt(b Backend, text, which, param string) ([]int32, error) {
	ids, err := b.Encode(text)
	var ve *VocabError
	if errors.As(err, &ve) {
		return nil, badRequest(param, "invalid_prompt", "%s: %v", which, ve)
	}
	if err != nil {
		return nil, badRequest(param, "invalid_prompt", "%s: %v", which, err)
	}
	if len(ids) == 0 {
		return nil, badRequest(param, "invalid_prompt", "%s is empty: want at least one token", which)
	}
	return ids, nil
}

// tokenPrompt checks a prompt given as token ids.
func tokenPrompt(b Backend, ids []int32, which string) ([]int32, error) {
	if len(ids) == 0 {
		return nil, badRequest("prompt", "invalid_prompt", "%s is empty: want at least one token", which)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= b.Vocab() {
			return nil, badRequest("prompt", "invalid_prompt", "%s: token %d at position %d is outside the vocabulary of %d tokens", which, id, i, b.Vocab())
		}
	}
	return ids, nil
}

// errTooLong refuses a prompt past the window before max_tokens is read.
func errTooLong(n, window int, which, param string) error {
	return badRequest(param, "context_length_exceeded", "%s has %d tokens, over the model's context window of %d tokens (max_tokens needs at least 1 more)", which, n, window)
}

func promptName(i, n int) string {
	if n == 1 {
		return "prompt"
	}
	return fmt.Sprintf("prompt[%d]", i)
}
