package browsertest

import "testing"

// failureShown checks the job page shows the failure history (it needs the library's failure
// history).
func failureShown(t *testing.T, _ *browser) {
	t.Helper()
}
