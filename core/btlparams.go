package core

import "fmt"

// btlParams are the parameters every BTL shares: what the PML reads from
// Attrs, each with one name, type and meaning in every btl block (Open
// MPI's btl_<name>_eager_limit, btl_<name>_exclusivity...). A BTL takes
// the ones it has with BTLParam, giving its own default.
var btlParams = []Param{
	{Name: "eager_limit", Type: ParamSize, Doc: "largest message, in user bytes, sent eagerly"},
	{Name: "max_send_size", Type: ParamSize, Doc: "largest payload of one frame, header excluded"},
	{Name: "rndv_eager_limit", Type: ParamSize, Doc: "user bytes carried inline in a rendezvous start"},
	{Name: "max_reads", Type: ParamInt, Doc: "outstanding RDMA reads per endpoint"},
	{Name: "bandwidth", Type: ParamRate, Doc: "bandwidth the PML's scheduler assumes for this module"},
	{Name: "latency", Type: ParamDuration, Doc: "one-way small-message latency the PML assumes for this module"},
	{Name: "exclusivity", Type: ParamInt,
		Doc: "rank against other modules reaching the same peer: only the highest is used unless the job says otherwise (self above shared memory above networks)"},
}

// BTLParam returns the declaration of a parameter every BTL shares —
// eager_limit, max_send_size, rndv_eager_limit, max_reads, bandwidth,
// latency, exclusivity — with this BTL's default. It panics on any other
// name: schemas are built at init, where a panic is a build error.
func BTLParam(name, def string) Param {
	for _, p := range btlParams {
		if p.Name == name {
			p.Default = def
			return p
		}
	}
	panic(fmt.Sprintf("core: BTLParam: %q is not a shared BTL parameter", name))
}

// WithRange returns p bounded by [min, max], in the textual form of its
// type; an empty side stays open (see Param.Min).
func (p Param) WithRange(min, max string) Param {
	p.Min, p.Max = min, max
	return p
}

// WithDoc returns p with the component's own detail after its doc.
func (p Param) WithDoc(more string) Param {
	p.Doc += "; " + more
	return p
}

// BTLAttrs reads the shared BTL parameters of p's schema into the Attrs
// fields they set (EagerLimit, MaxSendSize, RndvEagerLimit, MaxReads,
// Bandwidth, Latency, Exclusivity); fields whose parameter the schema
// lacks stay zero for the BTL to fill. It checks what no single range
// can: neither limit of an eager message may exceed max_send_size.
func BTLAttrs(p Params) (Attrs, error) {
	var a Attrs
	for _, d := range btlParams {
		if !p.Has(d.Name) {
			continue
		}
		switch d.Name {
		case "eager_limit":
			a.EagerLimit = int(p.Size(d.Name))
		case "max_send_size":
			a.MaxSendSize = int(p.Size(d.Name))
		case "rndv_eager_limit":
			a.RndvEagerLimit = int(p.Size(d.Name))
		case "max_reads":
			a.MaxReads = p.Int(d.Name)
		case "bandwidth":
			a.Bandwidth = p.Rate(d.Name)
		case "latency":
			a.Latency = p.Duration(d.Name)
		case "exclusivity":
			a.Exclusivity = p.Int(d.Name)
		}
	}
	if p.Has("max_send_size") {
		for _, lim := range []struct {
			name string
			v    int
		}{{"eager_limit", a.EagerLimit}, {"rndv_eager_limit", a.RndvEagerLimit}} {
			if lim.v > a.MaxSendSize {
				return a, fmt.Errorf("%s %s exceeds max_send_size %s", lim.name, FormatSize(int64(lim.v)), FormatSize(int64(a.MaxSendSize)))
			}
		}
	}
	return a, nil
}
