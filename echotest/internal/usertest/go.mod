module example.com/usertest

go 1.26.0

require github.com/echocache/echocache v0.0.0

require (
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/valkey-io/valkey-go v1.0.79 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/echocache/echocache => ../../..
