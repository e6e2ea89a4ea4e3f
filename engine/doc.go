// Package engine owns the paged-KV serving engine: it runs the GPT of
// package models (its paged, ragged forward, models.PagedModel) under the
// schedulers and the block manager of package serving, on real tokens.
// The block manager's blocks are the physical blocks of a KV pool
// (models.PagedKV); each iteration the engine carries out the batch's
// swap-outs, swap-ins and copy-on-write copies on the pool, runs every
// entry of the batch (prefill chunks and decode tokens of sequences of
// different lengths) in one forward, draws each sampling entry's token with
// the request's own models.Picker, and completes the batch: the driver
// contract of serving's package documentation.
//
// Two ways to drive it:
//
//   - From one goroutine, synchronously: Add requests, call Step until
//     Idle, read each Handle's tokens (the tests and Replay do this).
//   - From many goroutines: Run(ctx) runs the loop on its goroutine;
//     Submit queues a request and returns a channel of its Events (each
//     generated token in order, then one final event with the Finish and
//     the channel closes); cancelling Submit's context cancels the request
//     (its blocks are free once its in-flight batch completes); Submit
//     refuses with ErrBusy when the waiting queue is at its limit; Close
//     stops accepting and lets Run finish what is in flight; Stats reads
//     the counts. This is what an HTTP server drives: NewBackend is the
//     engine as serving/openai's Backend (a character tokenizer, Submit as
//     Generate).
//
// Config.Weights "int8" runs the linear layers on int8 matrices (one
// scale per output channel, models.Quantize), multiplied by
// Config.Int8Kernel (models.NewPagedModelInt8).
//
// Replay runs a serving.Request workload against the engine on the wall
// clock (arrivals at their times), recording serving's metrics and each
// iteration's work and duration, for the serving-engine lab and for
// fitting serving's cost model on the engine.
//
// It does not own the scheduling policies or the block manager (package
// serving's), the model or its sampling (package models'), or HTTP
// (serving/openai's; the server composes the two).
package engine
