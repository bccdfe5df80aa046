// Package slot computes Redis Cluster hash slots, as Redis does: for the
// shard tags of a sharded namespace (internal/scripts) and for the tests
// that place keys on masters (internal/redistest). rueidis has the same
// function, unexported.
package slot

import "strings"

// NumSlots is the number of Redis Cluster hash slots.
const NumSlots = 16384

// Of returns the hash slot of key: CRC16 (XMODEM) of the key, or of its
// hash tag (between the first '{' and the next '}', when not empty),
// modulo NumSlots.
func Of(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[i]]
	}
	return int(crc) % NumSlots
}

// crc16Table is CRC16-XMODEM's (polynomial 0x1021) byte table.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
