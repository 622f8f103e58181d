//go:build !linux

package pml

import (
	"runtime"
	"time"
)

func osYield() { runtime.Gosched() }

func osSleep(d time.Duration) { time.Sleep(d) }

func osSleepRaw(d time.Duration) { time.Sleep(d) }
