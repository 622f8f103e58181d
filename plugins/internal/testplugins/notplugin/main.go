// Command notplugin is an ordinary program, for the test that a host
// refuses an executable that is not a plugin.
package main

import "fmt"

func main() { fmt.Println("hello, I am not a plugin") }
