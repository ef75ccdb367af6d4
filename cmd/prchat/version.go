package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// printVersion is `prchat version` (and --version): the module version,
// the VCS revision and time it was built from, and the Go that built it,
// from the binary's build information.
func printVersion(w io.Writer) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintf(w, "prchat (no build information)\ngo %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return
	}
	rev, at, dirty := "unknown", "", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = " (" + s.Value + ")"
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+modified"
			}
		}
	}
	fmt.Fprintf(w, "prchat %s\nrevision %s%s%s\n%s %s/%s\n", bi.Main.Version, rev, dirty, at, bi.GoVersion, runtime.GOOS, runtime.GOARCH)
}
