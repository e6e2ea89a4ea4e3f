package reports

import "golang.org/x/sys/unix"

// systemCPUName asks sysctl: machdep.cpu.brand_string ("Apple M2",
// "Intel(R) Core(TM) i7-..."), else hw.model ("MacBookAir10,1").
func systemCPUName() string {
	for _, name := range []string{"machdep.cpu.brand_string", "hw.model"} {
		if v, err := unix.Sysctl(name); err == nil && v != "" {
			return v
		}
	}
	return ""
}
