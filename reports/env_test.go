package reports

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"gptlab/internal/emulated"
)

// The kernels a component registered reach the environment as they are
// when the report is stamped, its JSON, and the outermost report's text
// only (the reports it holds were measured on the same machine).
func TestEnvNamesKernels(t *testing.T) {
	saved := kernelNamers
	defer func() { kernelNamers = saved }()
	kernelNamers = nil
	choice := "avx2"
	NameKernel("matmul", func() string { return "sgemm/" + choice })
	NameKernel("crc32c", func() string { return "hash/crc32" })

	outer, inner := New("gate", "outer"), New("lab", "inner")
	outer.Reports = []*Report{inner}
	inner.Env = CurrentEnv()
	choice = "avx512" // asked again at each stamp, never cached
	outer.Env = CurrentEnv()
	if v, _ := outer.Env.Kernels.Get("matmul"); v != "sgemm/avx512" {
		t.Errorf("outer matmul kernel %v, want sgemm/avx512", v)
	}
	if v, _ := inner.Env.Kernels.Get("matmul"); v != "sgemm/avx2" {
		t.Errorf("inner matmul kernel %v, want sgemm/avx2", v)
	}

	var text bytes.Buffer
	if err := outer.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(text.String(), "kernels: matmul: sgemm/"); n != 1 {
		t.Errorf("%d kernels lines in the text, want 1 (the outer report's):\n%s", n, text.String())
	}
	if !strings.Contains(text.String(), "kernels: matmul: sgemm/avx512, crc32c: hash/crc32") {
		t.Errorf("the text does not name the outer report's kernels:\n%s", text.String())
	}

	var js bytes.Buffer
	if err := outer.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if v, _ := back.Env.Kernels.Get("crc32c"); v != "hash/crc32" {
		t.Errorf("JSON round trip: crc32c kernel %v, want hash/crc32", v)
	}
}

// Every report names its platform: the environment's OS and architecture
// are this process's, the CPU is never empty (the text's env line is
// written only when it is set), and the text, markdown, HTML and JSON say
// os/arch and the CPU. Emulated, each says so too ("emulated (qemu-user)",
// "emulated": true); native, none does (the negative control).
func TestEnvNamesPlatform(t *testing.T) {
	e := CurrentEnv()
	if e.OS != runtime.GOOS || e.Arch != runtime.GOARCH || e.CPU == "" || e.Emulated != emulated.Is() {
		t.Fatalf("env os %q arch %q cpu %q emulated %v; want %s, %s, a CPU name and %v",
			e.OS, e.Arch, e.CPU, e.Emulated, runtime.GOOS, runtime.GOARCH, emulated.Is())
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, emu := range []bool{false, true} {
		r := New("lab", "title")
		r.Env = e
		r.Env.Emulated = emu
		outs := map[string]*bytes.Buffer{"text": {}, "markdown": {}, "html": {}, "json": {}}
		for name, err := range map[string]error{
			"text":     r.WriteText(outs["text"]),
			"markdown": r.WriteMarkdown(outs["markdown"]),
			"html":     r.WriteHTML(outs["html"], t.TempDir(), nil),
			"json":     r.WriteJSON(outs["json"]),
		} {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		for name, b := range outs {
			out := b.String()
			if name == "json" {
				var back struct {
					Env struct {
						OS, Arch, CPU string
						Emulated      *bool
					}
				}
				if err := json.Unmarshal(b.Bytes(), &back); err != nil {
					t.Fatal(err)
				}
				if back.Env.OS != e.OS || back.Env.Arch != e.Arch || back.Env.CPU != e.CPU ||
					back.Env.Emulated == nil || *back.Env.Emulated != emu {
					t.Errorf("emulated %v: the JSON's env is %+v, want os %s, arch %s, cpu %q, emulated %v",
						emu, back.Env, e.OS, e.Arch, e.CPU, emu)
				}
				continue
			}
			if !strings.Contains(out, platform) || !strings.Contains(out, e.CPU) {
				t.Errorf("the %s report does not name %s and %q:\n%s", name, platform, e.CPU, out)
			}
			if got := strings.Contains(out, emulated.Label); got != emu {
				t.Errorf("emulated %v: the %s report names %q: %v\n%s", emu, name, emulated.Label, got, out)
			}
		}
	}
}
