module github.com/gobtl/gobtl

go 1.26.0

require github.com/rs/zerolog v1.35.1

require (
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
