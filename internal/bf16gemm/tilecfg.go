package bf16gemm

// tileConfig returns the AMX kernel's tile configuration, LDTILECFG's 64
// bytes (palette 1): byte 0 the palette, byte 1 start_row, bytes 16-31
// each tile's bytes per row (colsb, little-endian uint16), bytes 48-55
// each tile's rows. All eight tiles are 16 rows of 64 bytes: tmm0-3 the
// 16×16 float32 tiles of C, tmm4-5 16 rows × 16 pairs of A, tmm6-7 16 pair
// rows × 16 columns of B.
func tileConfig() (cfg [64]byte) {
	cfg[0] = 1
	for t := range 8 {
		cfg[16+2*t] = 64
		cfg[48+t] = 16
	}
	return cfg
}
