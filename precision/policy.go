package precision

import (
	"errors"
	"fmt"
	"strings"
)

// Policy says in which format a training step keeps each kind of tensor.
// Storage precision, multiplication precision, accumulation precision and
// optimizer-state precision are independent choices; a Policy names one
// combination.
type Policy struct {
	Name        string
	Activations Format // activations, as stored (and as the backward reads them)
	Weights     Format // weights as the matmuls read them (a copy rounded from the master)
	Gradients   Format // gradients, as stored between ops
	Accumulate  Format // sums in matmuls and reductions
	Master      Format // master weights and the AdamW moments
	LossScaling bool   // dynamic loss scaling (Scaler) on the loss and gradients
}

// The named policies. Every one accumulates and keeps its master weights
// and optimizer state in f32.
var policies = []Policy{
	{Name: "f32", Activations: F32, Weights: F32, Gradients: F32, Accumulate: F32, Master: F32},
	{Name: "bf16", Activations: BF16, Weights: BF16, Gradients: BF16, Accumulate: F32, Master: F32},
	{Name: "fp16", Activations: FP16, Weights: FP16, Gradients: FP16, Accumulate: F32, Master: F32, LossScaling: true},
	// fp16 without loss scaling: the negative case, whose small gradients
	// flush to zero.
	{Name: "fp16-noscale", Activations: FP16, Weights: FP16, Gradients: FP16, Accumulate: F32, Master: F32},
}

// F32Policy is the float32 policy: the plain step, no cast at all. The zero
// Policy computes the same graph.
var F32Policy = policies[0]

// ErrUnknownPolicy is returned (wrapped) by ParsePolicy for a name that is
// not a policy.
var ErrUnknownPolicy = errors.New("unknown precision policy")

// PolicyNames lists the named policies.
func PolicyNames() []string {
	names := make([]string, len(policies))
	for i, p := range policies {
		names[i] = p.Name
	}
	return names
}

// ParsePolicy returns the policy called name: "f32", "bf16", "fp16" or
// "fp16-noscale".
func ParsePolicy(name string) (Policy, error) {
	for _, p := range policies {
		if p.Name == name {
			return p, nil
		}
	}
	return Policy{}, fmt.Errorf("precision: %w %q (want one of %s)", ErrUnknownPolicy, name, strings.Join(PolicyNames(), ", "))
}

// MarshalText is the policy's name, as a setting, a report and a
// checkpoint's metadata say it.
func (p Policy) MarshalText() ([]byte, error) {
	if p.Name == "" {
		return []byte(F32Policy.Name), nil
	}
	return []byte(p.Name), nil
}

// UnmarshalText reads a policy's name (ParsePolicy); its error, for a
// setting, names the choices (and is ErrUnknownPolicy).
func (p *Policy) UnmarshalText(b []byte) error {
	q, err := ParsePolicy(string(b))
	if err != nil {
		return policyChoices{}
	}
	*p = q
	return nil
}

// policyChoices is the error of an unknown policy's name as a setting.
type policyChoices struct{}

func (policyChoices) Error() string        { return "want one of " + strings.Join(PolicyNames(), ", ") }
func (policyChoices) Is(target error) bool { return target == ErrUnknownPolicy }

// Mixed reports whether the policy keeps anything in a 16-bit format.
func (p Policy) Mixed() bool {
	return p.Activations != F32 || p.Weights != F32 || p.Gradients != F32
}

// String returns the policy's name and formats, e.g.
// "bf16 (activations bf16, weights bf16, gradients bf16, accumulate f32, master f32)".
func (p Policy) String() string {
	s := fmt.Sprintf("%s (activations %v, weights %v, gradients %v, accumulate %v, master %v",
		p.Name, p.Activations, p.Weights, p.Gradients, p.Accumulate, p.Master)
	if p.LossScaling {
		s += ", loss scaling"
	}
	return s + ")"
}
