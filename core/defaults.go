package core

import "fmt"

// A BTL's default policies are configuration, not code the BTL links: its
// Component names them (Defaults) and core builds them from the registry
// when the job configures none of a kind, so that a BTL imports only core
// and its own device packages.

// withDefaults wraps a BTL's opener so that env carries the component's
// default policies where the job configured none.
func withDefaults(c *Component, open func(BTLEnv) ([]Module, error)) func(BTLEnv) ([]Module, error) {
	return func(env BTLEnv) ([]Module, error) {
		if err := useDefault(c, KindFlowControl, env.Params, &env.FlowControl); err != nil {
			return nil, err
		}
		if err := useDefault(c, KindRecvBuf, env.Params, &env.RecvBuffers); err != nil {
			return nil, err
		}
		return open(env)
	}
}

// useDefault puts c's default policy of kind into *slot unless the job
// configured one. The default takes its own defaults, but for the
// parameters it shares by name with the BTL's block that the block sets
// (btl "ib" { receive_queues = ... } lays out its default srq); with the
// job's own policy such a parameter is an error: it would configure
// nothing.
func useDefault[P any](c *Component, kind Kind, btl Params, slot *P) error {
	name, ok := c.Defaults[kind]
	if !ok {
		return nil
	}
	d, ok := Lookup(kind, name)
	if !ok {
		return fmt.Errorf("%s: no %s policy is configured and the default, %q, is not linked in", c.Name, kind, name)
	}
	var shared []string
	for _, p := range d.Params {
		if btl.IsSet(p.Name) {
			shared = append(shared, p.Name)
		}
	}
	if any(*slot) != nil {
		if len(shared) > 0 {
			return fmt.Errorf("%s: %s is set in the btl block, where it configures the default %s policy %q, and the job configures a %s policy: set it in the policy block",
				c.Name, shared[0], kind, name, kind)
		}
		return nil
	}
	params, err := NewParams(d.Params)
	if err != nil {
		return err
	}
	for _, n := range shared {
		v, _ := btl.Value(n)
		if err := params.Set(n, v); err != nil {
			return fmt.Errorf("%s: %s, for its default %s policy %q: %w", c.Name, n, kind, name, err)
		}
	}
	v, err := d.NewPolicy(params)
	if err != nil {
		return fmt.Errorf("%s: the default %s policy %q: %w", c.Name, kind, name, err)
	}
	p, ok := v.(P)
	if !ok {
		return fmt.Errorf("%s: the default %s policy %q is a %T", c.Name, kind, name, v)
	}
	*slot = p
	return nil
}
