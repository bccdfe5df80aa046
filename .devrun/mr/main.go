package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
)

func main() {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		panic(err)
	}
	for _, pipe := range []bool{false, true} {
		opt := rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, ForceSingleClient: true}
		if pipe {
			opt.DialCtxFn = func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) { return m.Dial() }
		}
		c, err := rueidis.NewClient(opt)
		if err != nil {
			panic(err)
		}
		for _, n := range []int{64, 1024} {
			cmds := make(rueidis.Commands, n)
			for k := range n {
				cmds[k] = c.B().Get().Key("{x#" + strconv.Itoa(k) + "}:epoch").Build()
			}
			t := time.Now()
			c.DoMulti(context.Background(), cmds...)
			fmt.Println("pipe", pipe, "n", n, time.Since(t))
		}
		c.Close()
	}
}
