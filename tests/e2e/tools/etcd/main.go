// Command etcd is a thin wrapper around the upstream etcd server entry point,
// built from the pinned go.etcd.io/etcd/server/v3 module in go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
