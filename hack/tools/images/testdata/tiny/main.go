// Command tiny stands in for Lodestar's binaries on a platform the test
// machine cannot run: the image test checks that its layer holds a binary of
// that architecture.
package main

func main() {}
