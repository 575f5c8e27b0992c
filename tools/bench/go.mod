module github.com/leasecached/leasecached/tools/bench

go 1.26.8

require (
	github.com/leasecached/leasecached v0.0.0-00010101000000-000000000000
	golang.org/x/sys v0.35.0
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/stretchr/testify v1.11.1
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

// The load tool is a module of its own, so that the root module's `go test ./...` builds no part of it. It
// uses the root's internal/testdaemon; the root module needs gnet, replaced by the patched copy there.
replace github.com/leasecached/leasecached => ../..

replace github.com/panjf2000/gnet/v2 => ../../third_party/gnet
