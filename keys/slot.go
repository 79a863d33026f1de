package keys

import "strings"

// SlotCount is the number of hash slots of a Valkey cluster.
const SlotCount = 16384

// Slot is the cluster hash slot of key: CRC16-XMODEM mod 16384 over its hash tag, with
// Valkey's rules: the tag is what lies between the first '{' and the first '}' after it, if
// that is non-empty; otherwise the whole key is hashed.
func Slot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return crc16(key) % SlotCount
}

// crc16 is CRC16-XMODEM (polynomial 0x1021, initial 0), the cluster's key hash.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTab[byte(crc>>8)^s[i]]
	}
	return crc
}

var crcTab = func() (t [256]uint16) {
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
