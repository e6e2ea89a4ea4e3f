// Package serving owns the pieces of an LLM server that decide what runs
// when: requests and workloads (generated from a seed or read from a CSV
// trace), the paged KV block manager with vLLM-style automatic prefix
// caching and its invariant checker, the fixed and continuous schedulers, an
// iteration cost model (given or fitted by least squares), the
// discrete-event simulator, and the serving metrics exactly as vLLM's
// benchmarks/benchmark_serving.py defines them. It knows no model and no
// command: the experiments package composes it into the serving lab, and a
// real-model engine drives the very same scheduler.
//
// # The driver contract
//
// A driver (the simulator here, a model engine elsewhere) owns the clock and
// the model. It turns each arrived request into a Seq with NewSeq, hands it
// to the scheduler with Add, and then loops:
//
//	b := sched.Schedule()          // the next iteration's work, or an empty batch
//	// before the model runs: b.SwapOut (device → host), then b.SwapIn
//	// (host → device) and b.Copies (copy-on-write, device → device)
//	// run the model on b.Entries: entry e processes tokens [e.Start, e.Start+e.N)
//	// of e.Seq, writing their KV into the slots of e.Seq.Table, and for an entry
//	// with e.Sample set, samples the next token into e.Token (e.Stop on EOS)
//	sched.Complete(b)              // KV committed, tokens appended, ends released
//
// Cancel may be called at any moment, between or during iterations: a
// request cancelled while its batch is in flight keeps its blocks until that
// batch completes, so the model never writes into a block that was handed to
// another request. The simulator does the same loop with a Cost model for
// time, synthetic tokens, and a Recorder for the metrics.
//
// Positions: a sequence's tokens are its prompt followed by its sampled
// output tokens. KV is held for the first Seq.Computed of them; the last
// sampled token has no KV yet and is the input of the next decode, so a
// request with P prompt and O output tokens holds at most P+O-1 tokens of KV.
package serving
