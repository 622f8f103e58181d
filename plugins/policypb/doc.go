// Package policypb holds the gRPC protocol between gobtl and its policy
// plugins, generated from policy.proto. Plugin authors in Go never use it
// directly (plugins/sdk wraps it); authors in other languages generate
// their own stubs from policy.proto.
package policypb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative policy.proto
