package ketama_test

import (
	"fmt"

	"github.com/leasecached/leasecached/clientlib/ketama"
)

func ExampleNew() {
	servers := []string{"10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:22122"}
	nodes := make([]ketama.Node, len(servers))
	for i, s := range servers {
		nodes[i] = ketama.Node{Name: ketama.NodeName(s), Weight: 1}
	}
	r := ketama.New(nodes)
	fmt.Println(r.Points(), nodes[0].Name, nodes[2].Name)
	fmt.Println(servers[r.Get("user:42")] != "")
	// Output:
	// 480 10.0.0.1 10.0.0.3:22122
	// true
}
