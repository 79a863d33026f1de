// Package archtest holds the import-direction test: which package of the module may import which.
package archtest
