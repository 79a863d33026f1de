package keys_test

import (
	"fmt"

	"github.com/echocache/echocache/keys"
)

func Example() {
	q, err := keys.NewQueue("orders")
	if err != nil {
		panic(err)
	}
	fmt.Println(q.Pending(), keys.Slot(q.Pending()))

	k, err := keys.Parse("ecc:{fills}:42")
	fmt.Println(k.Role, k.Name, k.Type, k.ID, err, keys.Slot("ecc:{fills}:42"))

	_, err = keys.NewQueue("pay{ments}")
	fmt.Println(err)
	// Output:
	// emq:{orders}:pending 105
	// cache fills row 42 <nil> 4165
	// queue: keys: invalid name "pay{ments}": byte "{" at 3; a name is 1 to 64 bytes of [A-Za-z0-9_.-]
}
