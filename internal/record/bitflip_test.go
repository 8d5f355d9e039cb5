package record

import (
	"bytes"
	"testing"
)

func TestOneBitFlippedFindsEveryFlippedBit(t *testing.T) {
	batch := NewBatch(1000, []Record{
		{Key: []byte("k1"), Value: bytes.Repeat([]byte("v"), 300)},
		{Key: []byte("k2"), Value: make([]byte, 1200)},
	})
	for pos := offCRC; pos < len(batch); pos++ {
		for bit := range 8 {
			b := bytes.Clone(batch)
			b[pos] ^= 1 << bit
			if !OneBitFlipped(b) {
				t.Fatalf("a flip of bit %d at byte %d was not recognised", bit, pos)
			}
		}
	}
	if OneBitFlipped(batch) {
		t.Fatal("an intact batch counts as a flipped one")
	}
}

func TestOneBitFlippedRejectsOtherDamage(t *testing.T) {
	batch := NewBatch(1000, []Record{{Value: bytes.Repeat([]byte("abcdefgh"), 1024)}})
	cases := map[string]func([]byte){
		"two bits in different bytes": func(b []byte) { b[100] ^= 1; b[4000] ^= 0x10 },
		"a page lost to zeros":        func(b []byte) { clear(b[4096 : 4096+4096]) },
		"a byte of garbage":           func(b []byte) { b[2000] ^= 0xA5 },
	}
	for name, damage := range cases {
		b := bytes.Clone(batch)
		damage(b)
		if OneBitFlipped(b) {
			t.Errorf("%s: taken for one flipped bit", name)
		}
	}
}
