package serving

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"
)

// LengthKind names a distribution of token counts.
type LengthKind string

// The length distributions.
const (
	FixedLength     LengthKind = "fixed"     // fixed:N
	UniformLength   LengthKind = "uniform"   // uniform:LO:HI, both included
	LogNormalLength LengthKind = "lognormal" // lognormal:MEDIAN:SIGMA:CAP, at least 1
	ZipfLength      LengthKind = "zipf"      // zipf:S:LO:HI, P(LO+k) ∝ (1+k)^-S, S > 1
)

// Lengths is a distribution of token counts, capped.
type Lengths struct {
	Kind   LengthKind
	Lo, Hi int     // fixed: Lo; uniform and Zipf draw in [Lo, Hi]; lognormal is clamped to it
	Median float64 // lognormal: exp of the log's mean
	Sigma  float64 // lognormal: standard deviation of the log
	S      float64 // Zipf exponent
}

// maxLength bounds every length a workload can ask for.
const maxLength = 1 << 20

// ParseLengths reads a spec such as "fixed:128", "uniform:32:512",
// "lognormal:128:1.0:1024" or "zipf:1.5:16:2048".
func ParseLengths(spec string) (Lengths, error) {
	parts := strings.Split(spec, ":")
	kind := LengthKind(parts[0])
	want := map[LengthKind]int{FixedLength: 2, UniformLength: 3, LogNormalLength: 4, ZipfLength: 4}[kind]
	if want == 0 {
		return Lengths{}, fmt.Errorf("lengths %q: want fixed:N, uniform:LO:HI, lognormal:MEDIAN:SIGMA:CAP or zipf:S:LO:HI", spec)
	}
	if len(parts) != want {
		return Lengths{}, fmt.Errorf("lengths %q: %s takes %d values", spec, kind, want-1)
	}
	num := make([]float64, len(parts)-1)
	for i, p := range parts[1:] {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return Lengths{}, fmt.Errorf("lengths %q: %q is not a number", spec, p)
		}
		num[i] = v
	}
	integer := func(v float64) (int, error) {
		if v != math.Trunc(v) || v < 1 || v > maxLength {
			return 0, fmt.Errorf("lengths %q: %v is not a whole number of tokens in [1, %d]", spec, v, maxLength)
		}
		return int(v), nil
	}
	l := Lengths{Kind: kind}
	var err error
	switch kind {
	case FixedLength:
		l.Lo, err = integer(num[0])
		l.Hi = l.Lo
	case UniformLength:
		if l.Lo, err = integer(num[0]); err == nil {
			l.Hi, err = integer(num[1])
		}
	case LogNormalLength:
		l.Median, l.Sigma, l.Lo = num[0], num[1], 1
		l.Hi, err = integer(num[2])
	case ZipfLength:
		l.S = num[0]
		if l.Lo, err = integer(num[1]); err == nil {
			l.Hi, err = integer(num[2])
		}
	}
	if err != nil {
		return Lengths{}, err
	}
	if err := l.Validate(); err != nil {
		return Lengths{}, fmt.Errorf("lengths %q: %w", spec, err)
	}
	return l, nil
}

// Validate reports a distribution that cannot be drawn from.
func (l Lengths) Validate() error {
	switch {
	case l.Lo < 1 || l.Hi < l.Lo || l.Hi > maxLength:
		return fmt.Errorf("range [%d, %d]: want 1 ≤ lo ≤ hi ≤ %d", l.Lo, l.Hi, maxLength)
	case l.Kind == LogNormalLength && !(l.Median >= 1 && l.Median <= maxLength && l.Sigma >= 0 && l.Sigma <= 10):
		return fmt.Errorf("lognormal median %g, sigma %g: want median in [1, %d], sigma in [0, 10]", l.Median, l.Sigma, maxLength)
	case l.Kind == ZipfLength && !(l.S > 1 && l.S <= 100):
		return fmt.Errorf("zipf exponent %g: want (1, 100]", l.S)
	case l.Kind != FixedLength && l.Kind != UniformLength && l.Kind != LogNormalLength && l.Kind != ZipfLength:
		return fmt.Errorf("unknown kind %q", l.Kind)
	}
	return nil
}

// String is the spec ParseLengths reads back.
func (l Lengths) String() string {
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	switch l.Kind {
	case FixedLength:
		return fmt.Sprintf("fixed:%d", l.Lo)
	case UniformLength:
		return fmt.Sprintf("uniform:%d:%d", l.Lo, l.Hi)
	case LogNormalLength:
		return fmt.Sprintf("lognormal:%s:%s:%d", g(l.Median), g(l.Sigma), l.Hi)
	case ZipfLength:
		return fmt.Sprintf("zipf:%s:%d:%d", g(l.S), l.Lo, l.Hi)
	}
	return string(l.Kind)
}

// sampler returns a function drawing from l with r.
func (l Lengths) sampler(r *rand.Rand) func() int {
	switch l.Kind {
	case UniformLength:
		return func() int { return l.Lo + r.IntN(l.Hi-l.Lo+1) }
	case LogNormalLength:
		mu := math.Log(l.Median)
		return func() int {
			v := math.Round(math.Exp(mu + l.Sigma*r.NormFloat64()))
			return int(min(max(v, float64(l.Lo)), float64(l.Hi)))
		}
	case ZipfLength:
		z := rand.NewZipf(r, l.S, 1, uint64(l.Hi-l.Lo))
		return func() int { return l.Lo + int(z.Uint64()) }
	}
	return func() int { return l.Lo }
}

// Workload describes requests drawn from a seed.
type Workload struct {
	N    int     // requests
	Rate float64 // mean arrivals per second; 0 or +Inf puts every request at time 0
	// CV is the coefficient of variation of the gaps between arrivals:
	// 1 (or 0) is a Poisson process, above 1 burstier, below 1 more even
	// (gamma-distributed gaps of shape 1/CV², vLLM's burstiness).
	CV     float64
	Prompt Lengths // the prompt's own tokens, after any shared prefix
	Output Lengths
	// Groups > 0 gives each request one of that many shared prefixes of
	// PrefixLen tokens (uniformly at random), ahead of its own prompt.
	Groups    int
	PrefixLen int
	// CancelFrac of the requests are cancelled by their client, an
	// exponentially distributed time (mean CancelAfter seconds) after arrival.
	CancelFrac  float64
	CancelAfter float64
	Seed        uint64
}

// Validate reports a workload that cannot be generated.
func (w Workload) Validate() error {
	switch {
	case w.N < 0 || w.N > 100_000_000:
		return fmt.Errorf("workload: %d requests: want 0 to 100000000", w.N)
	case w.Rate < 0 || math.IsNaN(w.Rate):
		return fmt.Errorf("workload: rate %g: want ≥ 0", w.Rate)
	case w.CV < 0 || w.CV > 100 || math.IsNaN(w.CV):
		return fmt.Errorf("workload: CV %g: want 0 to 100", w.CV)
	case w.Groups < 0 || (w.Groups > 0) != (w.PrefixLen > 0) || w.PrefixLen > maxLength:
		return fmt.Errorf("workload: %d groups with prefixes of %d tokens: want both 0 or both positive", w.Groups, w.PrefixLen)
	case !(w.CancelFrac >= 0 && w.CancelFrac <= 1) || (w.CancelFrac > 0 && !(w.CancelAfter > 0)):
		return fmt.Errorf("workload: cancel fraction %g after %g s: want a fraction, and a positive mean time when above 0", w.CancelFrac, w.CancelAfter)
	}
	if err := w.Prompt.Validate(); err != nil {
		return fmt.Errorf("workload: prompt lengths: %w", err)
	}
	if err := w.Output.Validate(); err != nil {
		return fmt.Errorf("workload: output lengths: %w", err)
	}
	return nil
}

// Generate draws the requests. Arrivals, lengths, groups and cancellations
// each have their own random stream, so changing one leaves the others.
func (w Workload) Generate() ([]Request, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	stream := func(k uint64) *rand.Rand { return rand.New(rand.NewPCG(w.Seed, 0x5e71f1a0+k)) }
	arrivals, lengths, groups, cancels := stream(1), stream(2), stream(3), stream(4)
	cv := w.CV
	if cv == 0 {
		cv = 1
	}
	shape := 1 / (cv * cv)
	gap := distuv.Gamma{Alpha: shape, Beta: shape * w.Rate, Src: arrivals}
	prompt, output := w.Prompt.sampler(lengths), w.Output.sampler(lengths)
	reqs := make([]Request, w.N)
	t := 0.0
	for i := range reqs {
		if i > 0 && w.Rate > 0 && !math.IsInf(w.Rate, 1) {
			t += gap.Rand() // the first request arrives at 0, as vLLM sends it at once
		}
		r := Request{ID: i, Arrival: t, Prompt: prompt(), Output: output()}
		if w.Groups > 0 {
			r.Group, r.PrefixLen = 1+groups.IntN(w.Groups), w.PrefixLen
			r.Prompt += w.PrefixLen
		}
		if w.CancelFrac > 0 && cancels.Float64() < w.CancelFrac {
			r.Cancel = t + cancels.ExpFloat64()*w.CancelAfter
		}
		reqs[i] = r
	}
	return reqs, nil
}
