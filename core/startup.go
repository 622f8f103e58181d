package core

// The start-up of a rank, as gobtl.Init records it in the job's Metrics
// (gauges, in nanoseconds) for `gobtl bench init` and for anyone who
// reports the launch cost of an engine. They are durations from the
// moment the program's Go runtime started (package initialization, a few
// milliseconds after exec), so that they include what the program did
// before it called Init.
const (
	// MetricInitCalled is when the program called Init.
	MetricInitCalled = "init.called_ns"
	// MetricInitBootstrap is when the bootstrap (gobtl run, PMIx, PMI)
	// was up: the engine's own share of the start-up.
	MetricInitBootstrap = "init.bootstrap_ns"
	// MetricInitBTLs is when every BTL was open and had published its
	// address.
	MetricInitBTLs = "init.btls_ns"
	// MetricInitExchange is when the address exchange (the fence) ended.
	MetricInitExchange = "init.exchange_ns"
	// MetricInitDone is when Init returned.
	MetricInitDone = "init.done_ns"
)

// StartupMetrics lists the start-up metrics in the order Init passes them.
var StartupMetrics = []string{MetricInitCalled, MetricInitBootstrap, MetricInitBTLs, MetricInitExchange, MetricInitDone}
