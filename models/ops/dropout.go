package ops

import "gptlab/internal/vec"

// Dropout masks are made by a counter-based generator: every element's
// random bits are a hash of (seed, step, layer, site, element index), so a
// mask can be regenerated at any time without stored state (the
// gradient-checkpointing lab recomputes a block's forward with the very
// masks of the first pass). The hash is SplitMix64's finaliser
// (vec.Mix64). The Dropout op draws its mask in the kernel that applies
// it (dropoutop.go); DropoutMask writes one out.

// mix64 is the generator's hash.
func mix64(z uint64) uint64 { return vec.Mix64(z) }

// golden64 is its counter step.
const golden64 = vec.Golden

// dropoutKey folds the counters into one 64-bit key.
func dropoutKey(seed, step int64, layer, site int) uint64 {
	k := mix64(uint64(seed) + golden64)
	k = mix64(k ^ (uint64(step) + 0x3c6ef372fe94f82a))
	k = mix64(k ^ (uint64(layer)<<8 | uint64(site)) + 0xdaa66d2c7ddf743f)
	return k
}

// DropoutMask fills dst with an inverted-dropout mask for probability p:
// each element is 0 with probability p and 1/(1-p) otherwise, decided by
// the hash of (seed, step, layer, site, index). layer and site name the
// mask's place in the model (the caller's numbering; site below 256). The
// same arguments always give the same mask. p = 0 gives all ones.
func DropoutMask(dst []float32, p float64, seed, step int64, layer, site int) {
	DropoutMaskAt(dst, p, seed, step, layer, site, 0)
}

// DropoutMaskAt fills dst with elements first, first+1, … of the mask
// DropoutMask makes: a mask filled in pieces, by any goroutines, is the
// same mask.
func DropoutMaskAt(dst []float32, p float64, seed, step int64, layer, site, first int) {
	for i := range dst {
		dst[i] = 1
	}
	// 1·keep is keep and 1·0 is 0: the mask itself
	DropoutSite{Key: &DropoutKey{seed, step}, P: p, Layer: layer, Site: site}.mulAt(dst, dst, first)
}
