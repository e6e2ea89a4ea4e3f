package reports

import (
	"os"
	"strings"

	"golang.org/x/sys/windows/registry"
)

// systemCPUName reads the first processor's ProcessorNameString from the
// registry, else the PROCESSOR_IDENTIFIER Windows sets in every
// environment ("AMD64 Family 25 Model 1 Stepping 1, AuthenticAMD").
func systemCPUName() string {
	if v := registryCPUName(); v != "" {
		return v
	}
	return strings.TrimSpace(os.Getenv("PROCESSOR_IDENTIFIER"))
}

func registryCPUName() string {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, `HARDWARE\DESCRIPTION\System\CentralProcessor\0`, registry.QUERY_VALUE)
	if err != nil {
		return ""
	}
	defer k.Close()
	v, _, err := k.GetStringValue("ProcessorNameString")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(v)
}
