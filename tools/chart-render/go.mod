// Built in GOPATH mode against Debian's packaged sources (see build.ts), not with the module proxy. This file
// is what lets GOPATH mode read the /v3 in github.com/Masterminds/sprig/v3 as Debian's unversioned directory.
module llm-router/chart-render

go 1.19
