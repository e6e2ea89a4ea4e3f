package openai

import (
	"encoding/json"
	"fmt"
	"strings"
)

// parseCompletion validates a POST /v1/completions body.
func parseCompletion(body []byte, b Backend) (*job, error) {
	f, err := parseFields(body)
	if err != nil {
		return nil, err
	}
	j := &job{}
	if err := parseCommon(f, b, j); err != nil {
		return nil, err
	}
	for _, u := range []struct {
		name string
		off  []string
	}{{"echo", []string{"false"}}, {"suffix", []string{`""`}}, {"logprobs", nil}} {
		if err := f.unsupported(u.name, u.off...); err != nil {
			return nil, err
		}
	}
	if j.prompts, err = parsePrompts(f, b); err != nil {
		return nil, err
	}
	if err := maxTokens(f, b, j, defaultMaxTokens, "max_tokens"); err != nil {
		return nil, err
	}
	return j, nil
}

// parsePrompts reads prompt: a string, a list of strings (one choice
// each), a list of token ids, or a list of lists of token ids.
func parsePrompts(f fields, b Backend) ([][]int32, error) {
	if !f.has("prompt") {
		return nil, badRequest("prompt", "missing_required_parameter", "prompt is required: a string, a list of strings, or token ids")
	}
	raw := f["prompt"]
	var texts []string
	var idLists [][]int32
	var one string
	var ids []int32
	switch {
	case json.Unmarshal(raw, &one) == nil:
		texts = []string{one}
	case decodes(raw, &texts):
	case decodes(raw, &idLists):
	case decodes(raw, &ids):
		idLists = [][]int32{ids}
	default:
		return nil, badRequest("prompt", "invalid_type", "prompt: want a string, a list of strings, or token ids, got %s", clip(string(raw)))
	}
	n := max(len(texts), len(idLists))
	if n == 0 {
		return nil, badRequest("prompt", "invalid_prompt", "prompt is an empty list: want at least one prompt")
	}
	if n > maxPrompts {
		return nil, badRequest("prompt", "out_of_range", "prompt: %d prompts, want at most %d in one request", n, maxPrompts)
	}
	out := make([][]int32, n)
	var err error
	for i := range n {
		which := promptName(i, n)
		if texts != nil {
			out[i], err = encodePrompt(b, texts[i], which, "prompt")
		} else {
			out[i], err = tokenPrompt(b, idLists[i], which)
		}
		if err != nil {
			return nil, err
		}
		if len(out[i]) >= b.ContextWindow() {
			return nil, errTooLong(len(out[i]), b.ContextWindow(), which, "prompt")
		}
	}
	return out, nil
}

// decodes unmarshals raw into *v, leaving *v nil unless it succeeds
// (json.Unmarshal fills a slice in part before it fails).
func decodes[T any](raw json.RawMessage, v *[]T) bool {
	var x []T
	if json.Unmarshal(raw, &x) != nil {
		return false
	}
	if x == nil {
		x = []T{}
	}
	*v = x
	return true
}

// The chat template. Messages are joined as
//
//	ROLE: CONTENT\n      (for each message, in order)
//	assistant:           (the model continues from here)
//
// with ROLE system, developer, user or assistant as sent, and a content
// given as a list of parts joined from its text parts.
const (
	chatRoleSep = ": "
	chatTurnEnd = "\n"
	chatPrompt  = "assistant:"
)

// ChatPrompt renders messages (role, content pairs) with the chat template.
func ChatPrompt(roles, contents []string) string {
	var b strings.Builder
	for i := range roles {
		b.WriteString(roles[i] + chatRoleSep + contents[i] + chatTurnEnd)
	}
	b.WriteString(chatPrompt)
	return b.String()
}

var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true}

// parseChat validates a POST /v1/chat/completions body.
func parseChat(body []byte, b Backend) (*job, error) {
	f, err := parseFields(body)
	if err != nil {
		return nil, err
	}
	j := &job{chat: true}
	if err := parseCommon(f, b, j); err != nil {
		return nil, err
	}
	for _, u := range []struct {
		name string
		off  []string
	}{{"logprobs", []string{"false"}}, {"top_logprobs", []string{"0"}}} {
		if err := f.unsupported(u.name, u.off...); err != nil {
			return nil, err
		}
	}
	roles, contents, err := parseMessages(f)
	if err != nil {
		return nil, err
	}
	ids, err := encodePrompt(b, ChatPrompt(roles, contents), "the chat prompt (messages joined by the template)", "messages")
	if err != nil {
		return nil, err
	}
	if len(ids) >= b.ContextWindow() {
		return nil, errTooLong(len(ids), b.ContextWindow(), "the chat prompt (messages joined by the template)", "messages")
	}
	j.prompts = [][]int32{ids}
	if err := maxTokens(f, b, j, -1, "max_completion_tokens", "max_tokens"); err != nil {
		return nil, err
	}
	return j, nil
}

// parseMessages reads messages: a list of {role, content}, content a
// string or a list of {"type": "text", "text": ...} parts.
func parseMessages(f fields) (roles, contents []string, err error) {
	if !f.has("messages") {
		return nil, nil, badRequest("messages", "missing_required_parameter", "messages is required: a list of {role, content}")
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := f.read("messages", &msgs, "a list of {role, content} objects"); err != nil {
		return nil, nil, err
	}
	if len(msgs) == 0 || len(msgs) > maxMessages {
		return nil, nil, badRequest("messages", "out_of_range", "messages: %d, want 1 to %d", len(msgs), maxMessages)
	}
	for i, m := range msgs {
		if !chatRoles[m.Role] {
			return nil, nil, badRequest("messages", "invalid_value", "messages[%d].role = %q: want system, developer, user or assistant", i, clip(m.Role))
		}
		text, err := messageText(m.Content)
		if err != nil {
			return nil, nil, badRequest("messages", "invalid_type", "messages[%d].content: %v", i, err)
		}
		roles, contents = append(roles, m.Role), append(contents, text)
	}
	return roles, contents, nil
}

func messageText(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("want a string or a list of text parts, got %s", clip(string(raw)))
	}
	var b strings.Builder
	for k, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", fmt.Errorf("part %d has type %q: this server takes text parts only", k, clip(p.Type))
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}
