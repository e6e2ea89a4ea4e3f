package precision

import (
	"errors"
	"fmt"
	"math"
)

// ScalerConfig holds the settings of dynamic loss scaling. The defaults
// (DefaultScalerConfig) are those of PyTorch's torch.cuda.amp.GradScaler,
// plus a floor it does not have.
type ScalerConfig struct {
	InitScale      float32 // the scale of the first step (2^16)
	GrowthFactor   float64 // the scale's multiplier after GrowthInterval finite steps in a row (2)
	BackoffFactor  float64 // the scale's multiplier after a step with a non-finite gradient (0.5)
	GrowthInterval int     // finite steps in a row before the scale grows (2000)
	// MinScale is the floor the backoff never goes below (1, as Megatron-LM
	// and DeepSpeed default to), so the scale never reaches 0 however many
	// steps overflow; GradScaler itself has none.
	MinScale float32
}

// DefaultScalerConfig returns GradScaler's defaults with a floor of 1.
func DefaultScalerConfig() ScalerConfig {
	return ScalerConfig{InitScale: 1 << 16, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000, MinScale: 1}
}

// ErrScalerConfig is returned (wrapped) by NewScaler for a setting out of
// range.
var ErrScalerConfig = errors.New("invalid loss scaler setting")

// Check reports the first setting out of range.
func (c ScalerConfig) Check() error {
	bad := func(name string, v any, want string) error {
		return fmt.Errorf("precision: %w: %s = %v, want %s", ErrScalerConfig, name, v, want)
	}
	finite := func(x float64) bool { return !math.IsInf(x, 0) && !math.IsNaN(x) }
	switch {
	case !(c.MinScale > 0) || !finite(float64(c.MinScale)):
		return bad("MinScale", c.MinScale, "a finite value > 0")
	case !(c.InitScale >= c.MinScale) || !finite(float64(c.InitScale)):
		return bad("InitScale", c.InitScale, fmt.Sprintf("finite and >= MinScale (%v)", c.MinScale))
	case !(c.GrowthFactor > 1) || !finite(c.GrowthFactor):
		return bad("GrowthFactor", c.GrowthFactor, "a finite value > 1")
	case !(c.BackoffFactor > 0 && c.BackoffFactor < 1):
		return bad("BackoffFactor", c.BackoffFactor, "a value in (0, 1)")
	case c.GrowthInterval < 1:
		return bad("GrowthInterval", c.GrowthInterval, ">= 1")
	}
	return nil
}

// Scaler is dynamic loss scaling with GradScaler's semantics. One training
// step is:
//
//	loss' = s.ScaleLoss(loss)     // backward from loss' gives scaled gradients
//	ok := s.Unscale(grads...)     // divides them by the scale, checks every value
//	if ok { clip, optimizer step }
//	s.Update()                    // adjusts the scale; reports a skipped step
//
// Update multiplies the scale by BackoffFactor (not below MinScale) and
// restarts the count of finite steps when a gradient held an Inf or NaN
// (the step must then be skipped); otherwise it counts the step and, at
// the GrowthInterval-th finite step in a row, multiplies the scale by
// GrowthFactor unless that would overflow float32, and restarts the count.
// A Scaler is not safe for concurrent use.
type Scaler struct {
	cfg      ScalerConfig
	scale    float32
	tracker  int // finite steps in a row since the last change of the scale
	unscaled bool
	foundInf bool
	steps    int
	skipped  int
}

// NewScaler returns a Scaler at cfg.InitScale.
func NewScaler(cfg ScalerConfig) (*Scaler, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	return &Scaler{cfg: cfg, scale: cfg.InitScale}, nil
}

// Config returns the scaler's settings.
func (s *Scaler) Config() ScalerConfig { return s.cfg }

// Scale returns the current loss scale.
func (s *Scaler) Scale() float32 { return s.scale }

// ScaleLoss returns loss multiplied by the current scale.
func (s *Scaler) ScaleLoss(loss float32) float32 { return loss * s.scale }

// Unscale multiplies every gradient value by 1/scale (the reciprocal taken
// in float64 and rounded to float32, as GradScaler does; a multiply by 1
// is skipped), in place, and reports whether every value of every slice
// was finite before it. It may be called several times in a step (for
// groups of gradients), each gradient once; non-finite values are still
// multiplied.
func (s *Scaler) Unscale(grads ...[]float32) bool {
	inv := float32(1 / float64(s.scale))
	for _, g := range grads {
		if maxAbsBits(g, inv, inv != 1) >= 0x7F800000 {
			s.foundInf = true
		}
	}
	s.unscaled = true
	return !s.foundInf
}

// Update ends the step: it adjusts the scale by what Unscale found and
// reports whether the step was to be skipped (a gradient was not
// finite). It panics if Unscale was not called since the last Update (as
// GradScaler's update does: there is nothing to base the scale on).
func (s *Scaler) Update() (skipped bool) {
	if !s.unscaled {
		panic("precision: Scaler.Update without Unscale in the step")
	}
	skipped = s.foundInf
	s.steps++
	if skipped {
		s.skipped++
		s.scale = max(float32(float64(s.scale)*s.cfg.BackoffFactor), s.cfg.MinScale)
		s.tracker = 0
	} else if s.tracker++; s.tracker == s.cfg.GrowthInterval {
		if g := float32(float64(s.scale) * s.cfg.GrowthFactor); !math.IsInf(float64(g), 0) {
			s.scale = g
		}
		s.tracker = 0
	}
	s.unscaled, s.foundInf = false, false
	return skipped
}

// ScalerState is a Scaler's state between two steps: what a training
// checkpoint saves so that a resumed run scales as if it had never
// stopped.
type ScalerState struct {
	Scale   float32 // the current loss scale
	Tracker int     // finite steps in a row since the scale last changed
	Steps   int     // steps ended by Update
	Skipped int     // of those, steps with a non-finite gradient
}

// State returns the scaler's state between steps.
func (s *Scaler) State() ScalerState {
	return ScalerState{Scale: s.scale, Tracker: s.tracker, Steps: s.steps, Skipped: s.skipped}
}

// SetState restores a state saved by State (under the same config): the
// scale must be finite and at least MinScale, the tracker below
// GrowthInterval, and the counts consistent. A step in progress (Unscale
// without Update) is abandoned.
func (s *Scaler) SetState(st ScalerState) error {
	switch {
	case !(st.Scale >= s.cfg.MinScale) || math.IsInf(float64(st.Scale), 0):
		return fmt.Errorf("precision: %w: state scale %v, want finite and >= MinScale (%v)", ErrScalerConfig, st.Scale, s.cfg.MinScale)
	case st.Tracker < 0 || st.Tracker >= s.cfg.GrowthInterval:
		return fmt.Errorf("precision: %w: state tracker %d, want in [0, GrowthInterval %d)", ErrScalerConfig, st.Tracker, s.cfg.GrowthInterval)
	case st.Skipped < 0 || st.Steps < st.Skipped:
		return fmt.Errorf("precision: %w: state of %d steps, %d skipped", ErrScalerConfig, st.Steps, st.Skipped)
	}
	s.scale, s.tracker, s.steps, s.skipped = st.Scale, st.Tracker, st.Steps, st.Skipped
	s.unscaled, s.foundInf = false, false
	return nil
}

// Steps returns how many steps Update ended.
func (s *Scaler) Steps() int { return s.steps }

// Skipped returns how many steps had a non-finite gradient.
func (s *Scaler) Skipped() int { return s.skipped }

// maxAbsBits returns the largest x[i]&0x7FFFFFFF (a value is finite iff
// its bits are below 0x7F800000's), first multiplying every value by inv
// in place if scale is set. The kernel takes the whole groups.
func maxAbsBits(x []float32, inv float32, scale bool) uint32 {
	k := active.abs
	n := whole(len(x), k.group, k.maxAbs != nil)
	var m uint32
	if n > 0 {
		if scale {
			m = k.unscale(&x[0], n, inv)
		} else {
			m = k.maxAbs(&x[0], n)
		}
	}
	for i := n; i < len(x); i++ {
		m = max(m, math.Float32bits(x[i])&0x7FFFFFFF)
		if scale {
			x[i] *= inv
		}
	}
	return m
}
