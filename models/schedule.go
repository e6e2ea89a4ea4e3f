package models

import "math"

// Schedule is the learning rate of the reference's train mode: a linear
// warmup over Warmup steps times a cosine decay from 1 to 0.1 over Iters:
//
//	lr(it) = LR · min(1, (it+1)/Warmup) · (0.1 + 0.9 · ½(1 + cos(π·it/Iters)))
type Schedule struct {
	LR     float64
	Warmup int
	Iters  int
}

// At returns the learning rate of step it (0-based).
func (s Schedule) At(it int) float64 {
	warm := 1.0
	if s.Warmup > 0 {
		warm = math.Min(1, float64(it+1)/float64(s.Warmup))
	}
	decay := 1.0
	if s.Iters > 0 {
		decay = 0.1 + 0.9*0.5*(1+math.Cos(math.Pi*float64(it)/float64(s.Iters)))
	}
	return s.LR * warm * decay
}
