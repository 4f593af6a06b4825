package kafka

import "hash"

// murmur2 is the 32-bit MurmurHash2 variant that Kafka's Java client uses
// to pick a partition (org.apache.kafka.common.utils.Utils.murmur2), as a
// hash.Hash32 for Sarama's custom hash partitioner.
type murmur2 struct {
	buf []byte
}

func newMurmur2() hash.Hash32 { return &murmur2{} }

func (m *murmur2) Write(p []byte) (int, error) {
	m.buf = append(m.buf, p...)
	return len(p), nil
}

func (m *murmur2) Sum(b []byte) []byte {
	s := m.Sum32()
	return append(b, byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
}

func (m *murmur2) Reset()         { m.buf = m.buf[:0] }
func (m *murmur2) Size() int      { return 4 }
func (m *murmur2) BlockSize() int { return 4 }

func (m *murmur2) Sum32() uint32 {
	const (
		seed uint32 = 0x9747b28c
		mul  uint32 = 0x5bd1e995
		r           = 24
	)
	b := m.buf
	h := seed ^ uint32(len(b))
	for len(b) >= 4 {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		b = b[4:]
		k *= mul
		k ^= k >> r
		k *= mul
		h *= mul
		h ^= k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= mul
	}
	h ^= h >> 13
	h *= mul
	h ^= h >> 15
	return h
}
