// Package crc32c computes CRC-32C (Castagnoli), the checksum of package
// parallel's frames, with the same results as hash/crc32's Castagnoli
// table, faster on CPUs with VPCLMULQDQ.
//
// hash/crc32 runs the SSE4.2 CRC32 instruction, eight bytes a cycle at
// best: about 22 GB/s here, which made the checksum a fifth of the TCP
// all-reduce's CPU time. Carry-less multiplication folds the data
// instead, as Intel's white paper "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ Instruction" describes: sixteen 16-byte
// lanes (four ZMM registers) are each multiplied forward by x^2048 mod P
// and XORed with the next 256 bytes, so the work is two VPCLMULQDQ and a
// three-way XOR per 64 bytes (about 75 GB/s here). CPUs with VPCLMULQDQ
// but no AVX-512 run the same on four YMM registers (about 40 GB/s);
// others use hash/crc32. The folding constants are computed from the
// polynomial at start-up, not copied from anywhere, and foldGo, the
// kernels' contract in Go, runs both shapes everywhere in the tests.
//
// The package owns the checksum and its kernel selection; it does not
// frame messages (package parallel does).
package crc32c
