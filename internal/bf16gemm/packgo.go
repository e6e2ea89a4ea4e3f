package bf16gemm

// interleaveRowsGo is interleaveRows's contract in Go (pack.go): for p <
// pairs and j < cols, d[p*w+j] = src[2p*ld+j] | src[(2p+1)*ld+j]<<16.
func interleaveRowsGo(pairs int, src []uint16, ld int, d []uint32, w, cols int) {
	for p := range pairs {
		lo := src[2*p*ld:][:cols]
		hi := src[(2*p+1)*ld:][:cols]
		dp := d[p*w:][:cols]
		for j, v := range lo {
			dp[j] = pair(v, hi[j])
		}
	}
}

// transposePairsGo is transposePairs's contract in Go (pack.go): for p <
// pairs and r < rows, d[p*w+r] = src[r*ld+2p] | src[r*ld+2p+1]<<16.
func transposePairsGo(pairs int, src []uint16, ld int, d []uint32, w, rows int) {
	for r := range rows {
		row := src[r*ld:][:2*pairs]
		for p := range pairs {
			d[p*w+r] = pair(row[2*p], row[2*p+1])
		}
	}
}
