//go:build !race

package softrc

func wireWritten() {}

func wireRead() {}
