// Package openai is an OpenAI-compatible HTTP server over a Backend: a
// tokenizer and a token generator (a paged-KV engine, or a fake in a
// test). It owns the HTTP side of serving (request validation, OpenAI's
// response and error shapes, server-sent events, stop strings, client
// disconnects, the queue's 429, draining on shutdown, Prometheus
// metrics) and knows no model, no scheduler and no command.
//
// # Endpoints
//
//   - POST /v1/completions: prompt as a string, a list of strings, a list
//     of token ids or a list of such lists. Each prompt of a list is its
//     own backend request and its own choice (index = its place in the
//     list), all started before the answer begins: if the backend is busy
//     for any of them, none runs and the answer is 429. max_tokens
//     (default 16), temperature (0 to 2, default 1; 0 is greedy), top_p
//     ((0, 1], default 1), top_k (-1 or 0 keep every token), seed, stop (a
//     string or up to 4), n (1 only), stream, stream_options.include_usage.
//   - POST /v1/chat/completions: messages joined by the chat template
//     below; max_completion_tokens or max_tokens (default: the rest of
//     the context window); the same sampling fields; a stream's first
//     delta of each choice carries "role": "assistant".
//   - GET /v1/models, GET /health (503 while draining), GET /metrics.
//
// The chat template joins the messages as
//
//	ROLE: CONTENT\n      for each message, in order
//	assistant:           the model continues from here
//
// (ChatPrompt renders it); a message's content is a string or a list of
// text parts, joined.
//
// A request without a seed gets its request number (1, 2, … in the order
// the server received them) as its seed: sampling is reproducible for a
// fixed order of requests, and no clock seeds anything.
//
// Stop strings: the server watches the decoded text, holds back any end
// of it that could begin a stop string, and at a stop string cuts the
// text before it, cancels the backend request and finishes with "stop".
// finish_reason is "length" when max_tokens is reached, "stop" for a
// stop string or the model's end token. A streamed choice's finish_reason
// rides on its last text chunk when the server knows it is the last.
//
// # Refusals
//
// 400 with OpenAI's body {"error": {"message", "type", "param", "code"}}
// for malformed JSON, an unknown model, a field of the wrong type or out
// of range (max_tokens below 1 or over the context window, temperature
// outside [0, 2], top_p outside (0, 1], n other than 1), a prompt with a
// character outside the vocabulary (named, with its position), a prompt
// plus max_tokens over the context window (both named; never
// truncated), and OpenAI fields this server does not implement when they
// are not "off" (logprobs, echo, suffix, best_of above 1, penalties,
// logit_bias, tools). Unknown fields are ignored. A body over
// Config.MaxBodyBytes (1 MiB by default) gets 413; a backend over its
// queue limit, 429 with Retry-After; a request while draining, 503.
//
// # Metrics
//
// /metrics serves, through the Prometheus Go client, vLLM's names with its
// model_name label: vllm:num_requests_running, vllm:num_requests_waiting,
// vllm:gpu_cache_usage_perc (the KV pool's use, 0 to 1), the histograms
// vllm:time_to_first_token_seconds, vllm:time_per_output_token_seconds
// (every gap between a request's consecutive tokens, as vLLM's) and
// vllm:e2e_request_latency_seconds with vLLM's buckets, the counters
// vllm:prompt_tokens_total, vllm:generation_tokens_total and
// vllm:request_success_total{finished_reason="stop|length|abort"}, and
// http_requests_total{handler, status}. Times run from the moment the
// server received the request.
//
// # Lifecycle
//
// A client that disconnects cancels its backend requests (the backend
// frees their KV blocks). Shutdown stops accepting, lets the requests in
// flight finish for a drain time, then cancels the rest and waits for
// them; a cancelled stream ends with an error event and data: [DONE].
package openai
