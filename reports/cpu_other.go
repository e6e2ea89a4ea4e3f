//go:build !linux && !darwin && !windows

package reports

// systemCPUName: no way to ask here (cpuName names the system instead).
func systemCPUName() string { return "" }
