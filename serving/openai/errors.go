package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// apiError is a refused request: its status and OpenAI's error body,
// {"error": {"message", "type", "param", "code"}}.
type apiError struct {
	Status  int
	Message string
	Type    string // invalid_request_error, ...
	Param   string // the field at fault, or "" (null)
	Code    string // a short machine-readable cause, or "" (null)
}

func (e *apiError) Error() string { return e.Message }

// badRequest is a 400 naming the field at fault.
func badRequest(param, code, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: code,
		Message: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON of an apiError.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func (e *apiError) body() errorBody {
	var b errorBody
	b.Error.Message, b.Error.Type = e.Message, e.Type
	if e.Param != "" {
		b.Error.Param = &e.Param
	}
	if e.Code != "" {
		b.Error.Code = &e.Code
	}
	return b
}

// writeError sends e; a 429 carries Retry-After (whole seconds, at least 1).
func writeError(w http.ResponseWriter, e *apiError, retryAfter time.Duration) {
	if e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((retryAfter+time.Second-1)/time.Second))))
	}
	writeJSON(w, e.Status, e.body())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil { // the server's own values always marshal
		panic(fmt.Sprintf("openai: marshal %T: %v", v, err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}
