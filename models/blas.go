package models

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"gonum.org/v1/gonum/blas/gonum"
	G "gorgonia.org/gorgonia"

	"gptlab/internal/sgemm"
)

// The matrix products of the GPT (and of every gorgonia graph in the
// process) go through one BLAS, chosen here. The default is gptlab's own
// Sgemm (assembly kernels for AVX2/AVX-512 with a pure-Go fallback);
// gonum's is the library default and the slow reference; "openblas" is
// there in builds with -tags openblas (cgo, libopenblas-dev).
var (
	blasMu    sync.Mutex
	blasName  string
	blasImpls = map[string]func(){
		"sgemm": sgemm.Use,
		"gonum": func() { G.Use(gonum.Implementation{}) },
	}
)

// init installs sgemm, or the BLAS named by the environment variable
// GPTLAB_BLAS (for comparisons: GPTLAB_BLAS=gonum).
func init() {
	name := os.Getenv("GPTLAB_BLAS")
	if name == "" {
		name = "sgemm"
	}
	if err := SetBLAS(name); err != nil {
		fmt.Fprintf(os.Stderr, "gptlab: GPTLAB_BLAS: %v; using sgemm\n", err)
		SetBLAS("sgemm")
	}
}

// SetBLAS installs the named BLAS for every graph of the process.
func SetBLAS(name string) error {
	blasMu.Lock()
	defer blasMu.Unlock()
	use, ok := blasImpls[name]
	if !ok {
		return fmt.Errorf("%w: unknown BLAS %q (known: %s)", ErrConfig, name, strings.Join(BLASNames(), ", "))
	}
	use()
	blasName = name
	return nil
}

// BLAS names the installed BLAS, with the kernel it runs for sgemm.
func BLAS() string {
	blasMu.Lock()
	defer blasMu.Unlock()
	if blasName == "sgemm" {
		return "sgemm/" + sgemm.Kernel()
	}
	return blasName
}

// BLASNames lists the BLAS implementations this build has.
func BLASNames() []string {
	names := make([]string, 0, len(blasImpls))
	for n := range blasImpls {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
